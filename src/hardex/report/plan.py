"""The report a config asks for, decided at planning time: which figures it draws, the files the report rules
write (`report_targets`, what `rule all` asks for), how tables and figures enter Snakemake's HTML report, and the
values the report rules get as params (provenance for the captions, benchmarks, pass@k, statistics settings,
the figures' style with a rehearsal's banner, ...).

Plain functions of the checked config (and of the config files Snakemake was given); rules/common.smk calls them
and rules/report.smk reads what they return, so a value here is what Snakemake tracks as a param. Snakemake's
`report` flag is passed in (`in_report`) rather than imported: the library stays free of Snakemake.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hardex import layout
from hardex.report import AnalysisError
from hardex.report.reference import reference_path
from hardex.report.render import TABLE_FORMATS
from hardex.report.tables import TABLES
from hardex.schedule import run_length
from hardex.selection import parse_tier_strategy
from hardex.settings import decodings, grpo_settings, run_strategies, seed_design, seed_list, split_spec

# every figure a config can draw (hardex.report.figures draws each) -> its label in the HTML report
FIGURE_LABELS = {
    "accuracy_curves": "accuracy during training",
    "learnable_vs_gain": "learnable % vs gain",
    "pool_pass_rates": "pool pass rates",
    "zero_std_share": "groups without learning signal",
    "gain_vs_compute": "gain against compute",
    "pass_at_k": "pass@k against k",
    "gain_curve": "gain at every checkpoint",
    "training_dynamics": "reward, mixed groups, length and KL during training",
    "gain_by_difficulty": "accuracy by the base model's difficulty",
    "capacity": "gain by model capacity",
    "tier_curves": "accuracy per tier during training",
    "across_tasks": "gain per task and strategy",
}
# the one figure that needs no training (its own rule, report_figure_pool); report_figures draws the others
POOL_FIGURE = "pool_pass_rates"
# captions as Snakemake reads them: relative to the rule file (rules/*.smk)
TABLE_CAPTION = "../report/table.rst"
FIGURE_CAPTION = "../report/figures/{name}.rst"


def figures(cfg: dict) -> dict[str, str]:
    """The figures of the config -> their labels: every figure, but gain by model capacity only where the config
    compares models, accuracy per tier only where it has paper 2's tier strategies, and the tasks side by side only
    where it has several."""
    drawn = [name for name in FIGURE_LABELS if name not in ("capacity", "tier_curves", "across_tasks")]
    if len(cfg["models"]) > 1:
        drawn.append("capacity")
    if any(parse_tier_strategy(s) for s in cfg["selection"]["strategies"]):
        drawn.append("tier_curves")
    if len(cfg["tasks"]) > 1:
        drawn.append("across_tasks")
    return {name: FIGURE_LABELS[name] for name in drawn}


def figure_formats(cfg: dict) -> list[str]:
    """The formats each figure is drawn in besides PNG (the PNG always: it is the one in the HTML report)."""
    return [f for f in cfg["report"]["figures"]["formats"] if f != "png"]


def table_files(names: Iterable[str], formats: Sequence[str] = TABLE_FORMATS) -> list[str]:
    """Each named table in each format (name by name)."""
    return [layout.fill(layout.TABLE, name=name, ext=ext) for name in names for ext in formats]


def figure_files(names: Iterable[str], formats: Sequence[str]) -> list[str]:
    """Each named figure in each format (name by name)."""
    return [layout.fill(layout.FIGURE, name=name, ext=ext) for name in names for ext in formats]


def report_targets(cfg: dict) -> list[str]:
    """Every file of the config's report: the report_tables rule's tables (`hardex.report.tables.TABLES`) and the
    compute table in every format, the regression, every figure in PNG and its other formats, and under a sequential
    design (seeds: {first, batch, max}) its verdict table."""
    targets = (
        table_files([*TABLES, "compute"])
        + [layout.REGRESSION]
        + figure_files(figures(cfg), ["png", *figure_formats(cfg)])
    )
    targets += table_files(["recommend"])
    if seed_design(cfg):
        targets += table_files(["sequential"])
    return targets


#: the HTML report's categories, as its menu lists them (sorted by name): the answer first, then the figures
ANSWER, FIGURES, TABLES_CATEGORY = "Answer", "Figures", "Tables"
ANSWER_TABLE = "headline"


def table_output(name: str, title: str, in_report: Callable[..., Any]) -> Any:
    """The table's HTML page as an output in the HTML report (`in_report`: Snakemake's `report`); its title
    and note say what it holds. The headline opens the report's menu, as the category "Answer"."""
    return in_report(layout.fill(layout.TABLE, name=name, ext="html"), caption=TABLE_CAPTION,
                     category=ANSWER if name == ANSWER_TABLE else TABLES_CATEGORY, labels={"table": title})


def figure_outputs(cfg: dict, names: Iterable[str], in_report: Callable[..., Any]) -> list[Any]:
    """Each named figure's PNG as an output in the HTML report (`in_report`: Snakemake's `report`), with its
    caption and label, followed by its other formats."""
    labels, formats = figures(cfg), figure_formats(cfg)
    return [
        path
        for name in names
        for path in [
            in_report(layout.fill(layout.FIGURE, name=name, ext="png"), caption=FIGURE_CAPTION.format(name=name),
                      category=FIGURES, labels={"figure": labels[name]}),
            *figure_files([name], formats),
        ]
    ]


def reference_files_or_exit(cfg: dict) -> list[str]:
    """The published reference the report reads (`report.reference`), as an input list: none without one. For
    the Snakefile: a reference that does not exist prints one line and exits before any job is planned."""
    reference = cfg["report"]["reference"]
    try:
        return [str(reference_path(reference))] if reference else []
    except AnalysisError as e:
        sys.exit(f"hardex: config error: {e}")


def config_name(configfiles: Sequence[str | Path]) -> str:
    """The config files as the user named them (relative to the working directory when inside it); config.yaml
    where none was given."""
    files = [str(f) for f in configfiles] or ["config.yaml"]
    return ", ".join(os.path.relpath(f) if not os.path.relpath(f).startswith("..") else f for f in files)


def provenance(cfg: dict, configfiles: Sequence[str | Path]) -> dict[str, Any]:
    """What the captions print about the run that produced a figure or table: the config file's name, each
    model's source, each task's benchmarks, the run strategies, the seeds, the budget and each model's
    training length."""
    models = list(cfg["models"])
    return {
        "configfile": config_name(configfiles),
        "models": {m: cfg["models"][m].get("gguf", cfg["models"][m]["path"]) for m in models},
        "tasks": benchmarks(cfg),
        "strategies": run_strategies(cfg),
        "seeds": seed_list(cfg),
        "budget": cfg["selection"]["budget"],
        "steps": {m: run_length(grpo_settings(cfg, m)) for m in models},
    }


def benchmarks(cfg: dict) -> dict[str, list[str]]:
    """Each task's benchmarks, the first its in-distribution one."""
    return {t: cfg["tasks"][t]["benchmarks"] for t in cfg["tasks"]}


def pass_k(cfg: dict) -> dict[str, list[int]]:
    """The k of pass@k each benchmark reports (its decoding's)."""
    return {b: d["pass_k"] for b, d in decodings(cfg).items()}


def rescoring(cfg: dict) -> dict[str, Any]:
    """What the rescored table reads: each task's first benchmark (its data file gives the references) with its
    family, and the scorer each task's config uses."""
    firsts = sorted({cfg["tasks"][t]["benchmarks"][0] for t in cfg["tasks"]})
    return {
        "benchmarks": firsts,
        "families": {b: split_spec(cfg, b)["family"] for b in firsts},
        "scorings": {t: cfg["tasks"][t]["scoring"] for t in cfg["tasks"]},
    }


def stats(cfg: dict) -> dict[str, Any]:
    """The intervals' settings: `report.ci_level` and `report.bootstrap` (iterations, seed)."""
    return {"ci_level": cfg["report"]["ci_level"], **cfg["report"]["bootstrap"]}


def group_sizes(cfg: dict) -> dict[str, int]:
    """Group size G (grpo.num_generations) per model: the learnable % a subset should give is predicted from the
    probe with it."""
    return {m: grpo_settings(cfg, m)["num_generations"] for m in cfg["models"]}


def banner(cfg: dict) -> str | None:
    """A rehearsal's line on every table and figure: its numbers are not results (None for a real run)."""
    if not cfg.get("rehearsal"):
        return None
    return f"REHEARSAL of {cfg['rehearsal']['of']} with stand-in models and seeded rewards: not results"


def figure_style(cfg: dict) -> dict[str, Any]:
    """How figures are drawn (`report.figures` but its formats, which are outputs) and the rehearsal banner."""
    return {k: v for k, v in cfg["report"]["figures"].items() if k != "formats"} | {"banner": banner(cfg)}


def model_stages(cfg: dict) -> dict[str, str]:
    """The models whose folder the workflow makes -> the job that makes it (`layout.MADE_BY`), whose timing
    file the compute table reads."""
    return {m: layout.MADE_BY[spec["path"]] for m, spec in cfg["models"].items() if spec["path"] in layout.MADE_BY}


def model_sizes(cfg: dict) -> dict[str, float]:
    """Each model's `size_b`, what the capacity figure counts for a model the workflow did not make."""
    return {m: cfg["models"][m]["size_b"] for m in cfg["models"]}


def counted_models(cfg: dict) -> dict[str, str]:
    """The made models whose own parameters the capacity figure counts -> their folder; a stand-in counts as the
    model it stands in for (its config's size_b), so it is left out."""
    return {m: layout.fill(layout.MODEL, model=m) for m, rule in model_stages(cfg).items() if rule != "standin_model"}
