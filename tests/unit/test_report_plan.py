"""The report a config asks for (hardex.report.plan): its figures, the files the report rules write, how they enter
the HTML report and the params the report rules get, from checked configs (the smoke config and the presets)."""

from __future__ import annotations

import copy
import os

import pytest
import yaml
from snakemake.io import report as snakemake_report

from hardex import layout
from hardex.config import check_config
from hardex.report import figures as drawn, plan
from hardex.report.render import TABLE_FORMATS
from hardex.report.tables import TABLES
from tests.support import ROOT, SMOKE

EVERY_RUN = ["accuracy_curves", "learnable_vs_gain", "pool_pass_rates", "zero_std_share", "gain_vs_compute",
             "pass_at_k", "gain_curve", "training_dynamics", "gain_by_difficulty"]


def checked(path=SMOKE, **changes) -> dict:
    cfg = yaml.safe_load(path.read_text())
    cfg.update(copy.deepcopy(changes))
    return check_config(cfg)


def preset(name: str) -> dict:
    return checked(ROOT / "experiments" / f"{name}.yaml")


def test_a_config_draws_capacity_only_when_it_compares_models_and_tier_curves_only_with_tier_strategies():
    assert list(plan.figures(checked())) == EVERY_RUN  # one model, one task, no tier strategy
    assert list(plan.figures(preset("cpu_study"))) == [*EVERY_RUN, "capacity", "across_tasks"]  # two of each
    assert list(plan.figures(preset("cpu_tiers"))) == [*EVERY_RUN, "capacity", "tier_curves"]


def test_every_figure_a_config_can_draw_has_a_drawing_function_a_caption_and_a_label():
    assert set(plan.FIGURE_LABELS) == set(drawn.FIGURES)  # what draw_figures draws from a job's output paths
    assert plan.POOL_FIGURE in plan.FIGURE_LABELS
    for name, label in plan.FIGURE_LABELS.items():
        assert (ROOT / "rules" / plan.FIGURE_CAPTION.format(name=name)).is_file(), name
        assert label
    assert (ROOT / "rules" / plan.TABLE_CAPTION).is_file()


def test_the_report_targets_are_every_table_the_regression_and_every_figure_in_each_format():
    cfg = checked(report={"figures": {"formats": ["png", "svg"]}})
    tables = [f"results/tables/{n}.{ext}" for n in [*TABLES, "compute"] for ext in ("md", "csv", "tex", "html")]
    figures = [f"results/figures/{n}.{ext}" for n in EVERY_RUN for ext in ("png", "svg")]
    recommend = [f"results/tables/recommend.{ext}" for ext in ("md", "csv", "tex", "html")]
    assert plan.report_targets(cfg) == tables + ["results/regression.json"] + figures + recommend
    assert plan.figure_formats(cfg) == ["svg"]
    # the schema's default: PNG (for the HTML report) and PDF
    assert plan.figure_formats(checked()) == ["pdf"]


def test_a_sequential_design_adds_its_verdict_table_to_the_targets():
    fixed = plan.report_targets(checked())
    design = plan.report_targets(checked(seeds={"first": 2, "batch": 1, "max": 3}))
    assert design == fixed + [f"results/tables/sequential.{ext}" for ext in TABLE_FORMATS]


def test_tables_and_figures_enter_snakemakes_html_report_with_their_caption_category_and_label():
    models = yaml.safe_load(SMOKE.read_text())["models"]
    cfg = checked(models={**models, "other": models["tiny"]})  # two models: the capacity figure
    table = plan.table_output("headline", TABLES["headline"], snakemake_report)
    assert table == "results/tables/headline.html"
    assert table.flags["report"].category == "Answer"  # the headline opens the menu, which sorts by name
    assert sorted([plan.ANSWER, plan.FIGURES, plan.TABLES_CATEGORY, "Regression"])[:2] == ["Answer", "Figures"]
    assert plan.table_output("pairwise", TABLES["pairwise"], snakemake_report).flags["report"].category == "Tables"
    assert table.flags["report"].labels == {"table": TABLES["headline"]}
    assert table.flags["report"].caption == plan.TABLE_CAPTION

    outputs = plan.figure_outputs(cfg, ["capacity", "pool_pass_rates"], snakemake_report)
    assert outputs == ["results/figures/capacity.png", "results/figures/capacity.pdf",
                       "results/figures/pool_pass_rates.png", "results/figures/pool_pass_rates.pdf"]
    png, pdf = outputs[:2]
    assert png.flags["report"].caption == "../report/figures/capacity.rst"
    assert png.flags["report"].category == "Figures"
    assert png.flags["report"].labels == {"figure": "gain by model capacity"}
    assert not getattr(pdf, "flags", {})  # the other formats are plain outputs


def test_a_figure_the_config_does_not_draw_has_no_output():
    with pytest.raises(KeyError):
        plan.figure_outputs(checked(), ["capacity"], snakemake_report)  # one model: no capacity figure


def test_the_reference_is_an_input_where_named_and_an_unknown_one_stops_planning_in_one_line(capsys):
    assert plan.reference_files_or_exit(checked()) == []
    shipped = plan.reference_files_or_exit(checked(report={"reference": "hard_examples_published"}))
    assert len(shipped) == 1 and shipped[0].endswith("hard_examples_published.csv") and os.path.isfile(shipped[0])
    with pytest.raises(SystemExit) as stop:
        plan.reference_files_or_exit(checked(report={"reference": "no_such_paper"}))
    assert str(stop.value).startswith("hardex: config error: report.reference: no shipped reference 'no_such_paper'")
    assert "\n" not in str(stop.value)


def test_provenance_names_the_config_file_as_the_user_did(tmp_path, monkeypatch):
    cfg = checked()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("")
    assert plan.config_name([tmp_path / "mine.yaml"]) == "mine.yaml"  # inside the working directory
    assert plan.config_name([SMOKE]) == str(SMOKE)  # outside it: as given
    assert plan.config_name([]) == "config.yaml"  # the embedded default
    assert plan.provenance(cfg, [tmp_path / "mine.yaml"]) == {
        "configfile": "mine.yaml",
        "models": {"tiny": "build"},
        "tasks": {"swaps": ["swaps/test", "swaps/ood"]},
        "strategies": ["hard", "easy", "random", "hard_online", "hard_format", "hard_random_reward"],
        "seeds": [0],
        "budget": 0.1,
        "steps": {"tiny": "4"},  # max_steps (hardex.schedule.run_length)
    }


def test_the_params_the_report_rules_share():
    cfg = checked()
    assert plan.benchmarks(cfg) == {"swaps": ["swaps/test", "swaps/ood"]}
    assert plan.pass_k(cfg) == {"swaps/ood": [1, 4], "swaps/test": [1]}  # swaps/ood's override
    assert plan.rescoring(cfg) == {"benchmarks": ["swaps/test"], "families": {"swaps/test": "swaps"},
                                   "scorings": {"swaps": "lenient"}}
    assert plan.stats(cfg) == {"ci_level": 0.95, "iterations": 2000, "seed": 0}
    assert plan.group_sizes(cfg) == {"tiny": 4}
    assert plan.banner(cfg) is None
    assert plan.figure_style(cfg) == {"dpi": 150, "font_size": 10, "panel_height": 3.2, "panel_width": 4.5,
                                      "rolling_window": 5, "banner": None}


def test_a_rehearsal_says_on_every_table_and_figure_that_its_numbers_are_not_results():
    cfg = checked(rehearsal={"of": "experiments/cpu_study.yaml"})
    assert plan.banner(cfg) == ("REHEARSAL of experiments/cpu_study.yaml with stand-in models and seeded rewards: "
                                "not results")
    assert plan.figure_style(cfg)["banner"] == plan.banner(cfg)


def test_the_capacity_figure_counts_made_models_but_not_stand_ins():
    cfg = checked()
    cfg["models"] |= {"stand": {**cfg["models"]["tiny"], "path": "standin", "size_b": 4.0},
                      "hub": {**cfg["models"]["tiny"], "path": "Qwen/Qwen3-4B", "size_b": 4.0}}
    assert plan.model_stages(cfg) == {"tiny": "build_model", "stand": "standin_model"}  # the compute table's
    assert plan.counted_models(cfg) == {"tiny": layout.fill(layout.MODEL, model="tiny")}
    assert plan.model_sizes(cfg) == {"tiny": cfg["models"]["tiny"]["size_b"], "stand": 4.0, "hub": 4.0}
