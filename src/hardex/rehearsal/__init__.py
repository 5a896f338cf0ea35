"""Rehearsal: any config run on a CPU in minutes, with stand-ins, before GPUs are rented for it.

`rehearsal_config` turns a config into its rehearsal: the same models (each a tiny random model of its
architecture, hardex.rehearsal.standin), tasks, strategies, scoring, tiers, epochs, evaluation and
report, with each hub dataset replaced by a few generated rows in its own format
(hardex.rehearsal.samples), runs cut to a few short steps, one seed, and the task's scorer wrapped by
a seeded one (`scoring: rehearsal+<scoring>`, hardex.tasks.seeded) so that everything that depends on
rewards runs too. The `hardex-rehearse` command (`main`) writes it and runs the workflow on it:

    hardex-rehearse experiments/hard_examples_paper.yaml            # writes and runs rehearsals/hard_examples_paper/
    hardex-rehearse experiments/difficulty_limits.yaml -n           # any further arguments go to snakemake
    hardex-rehearse --quick experiments/hard_examples_paper.yaml    # one strategy, one model per class (what CI runs)

The rehearsal's config is written to <dir>/config.yaml and runs there (snakemake --directory <dir>), so
its results never mix with a real run's; running the command again resumes it as Snakemake does. The
workflow is the working directory's Snakefile (run it in the checkout) or the one --snakefile names.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from hardex.architectures import config_of, known
from hardex.checkout import workflow_file
from hardex.forkserver import run_snakemake
from hardex.rehearsal.samples import sample_split
from hardex.schedule import completions_per_step
from hardex.schema import schema_defaults
from hardex.selection import RunName
from hardex.settings import GENERATED_FAMILIES
from hardex.tasks.seeded import PREFIX as SCORING_PREFIX

#: rows per split in a rehearsal: a pool large enough that a 10 % budget selects a step's prompts
POOL_ROWS, OTHER_ROWS, SFT_ROWS = 20, 6, 64
#: a rehearsal's runs: a few steps of a few prompts, short completions
PROMPTS_PER_STEP, MAX_STEPS, NEW_TOKENS = 2, 2, 16


class RehearsalError(ValueError):
    """A config that cannot be rehearsed; str() is one line naming the key."""


def _model(name: str, m: dict[str, Any]) -> dict[str, Any]:
    """A model entry's stand-in: hub and GGUF models become `standin` of their architecture; built ones stay."""
    if m.get("path") == "build":  # built here already: the same Qwen3 at the stand-ins' size, barely warm-started
        m = copy.deepcopy(m)
        build = m.setdefault("build", {})
        build.setdefault("arch", {}).update(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4)
        build.setdefault("warmstart", {})["epochs"] = 1
        return m
    arch = m.get("architecture") or m.get("path")
    if arch not in known():
        raise RehearsalError(f"models.{name}: no kept architecture for {arch!r}; set models.{name}.architecture to "
                             f"one of {', '.join(known())} (or add its config.json to src/hardex/architectures)")
    out = {k: v for k, v in m.items() if k not in ("path", "gguf", "build")}
    return {**out, "path": "standin", "architecture": arch}


def _absolute(value: Any, base: Path) -> Any:
    """A path written relative to where the config was run from, made absolute (a rehearsal runs elsewhere)."""
    return str((base / value).resolve()) if isinstance(value, str) and (base / value).exists() else value


def _splits(cfg: dict[str, Any], samples: Path, base: Path) -> None:
    """Every dataset split cut to a few rows: hub splits as generated rows of their format, others limited."""
    pools = {t["pool"] for t in cfg["tasks"].values()}
    sft = {r for m in cfg["models"].values() for r in (m.get("build") or {}).get("sft_from", [])}
    for ds, dcfg in cfg["datasets"].items():
        family = dcfg["family"]
        for split, spec in dcfg["splits"].items():
            ref = f"{ds}/{split}"
            n = POOL_ROWS if ref in pools else SFT_ROWS if ref in sft else OTHER_ROWS
            for listed in ("rows", "ids"):
                if listed in spec:
                    spec[listed] = _absolute(spec[listed], base)
                    if isinstance(spec[listed], list):
                        spec[listed] = spec[listed][:n]
            if family in GENERATED_FAMILIES:
                spec["n"] = min(spec.get("n", n), n)
            elif spec.get("hub"):
                try:
                    dcfg["splits"][split] = sample_split(family, spec, samples, n)
                except ValueError as e:
                    raise RehearsalError(f"datasets.{ds}.splits.{split}: {e}") from None
            else:
                spec["file"] = _absolute(spec.get("file"), base)
                spec["limit"] = min(spec.get("limit") or n, n)


def _grpo(grpo: dict[str, Any], whole: bool) -> None:
    """A few short steps, in one process, without 4-bit weights (both need GPUs), in the precision this CPU
    computes fastest (`auto`): the stand-ins keep their family's vocabulary, so a preset's bf16 on a CPU that
    emulates bfloat16 (AVX2) made the output layer most of a train job (a 2-step job 3.7x slower). `whole`:
    the top-level section (every key); else a model's override (its own keys)."""
    for key, on_cpu in (("quantization", "none"), ("processes", 1), ("distributed", "multi_gpu"),
                        ("precision", "auto")):
        if key in grpo:
            grpo[key] = on_cpu
    short = {"max_steps": MAX_STEPS, "save_steps": 1, "max_completion_length": NEW_TOKENS}
    for key, value in short.items():
        if whole or key in grpo:
            grpo[key] = min(grpo.get(key, value), value)
    if whole or "prompts_per_step" in grpo:
        grpo["prompts_per_step"] = min(grpo.get("prompts_per_step", 1), PROMPTS_PER_STEP)
    if grpo.get("epochs"):
        grpo["save_steps"] = 4  # an epoch of a rehearsal pool is up to ten steps: a few checkpoints, not each one


def _fit_accumulation(cfg: dict[str, Any]) -> None:
    """gradient_accumulation_steps must divide a step's completions, which the rehearsal made fewer."""
    defaults = schema_defaults("grpo")
    for m in cfg["models"].values():
        grpo = {**defaults, **cfg["grpo"], **(m.get("grpo") or {})}
        gas = math.gcd(grpo["gradient_accumulation_steps"], completions_per_step(grpo))
        if gas != grpo["gradient_accumulation_steps"]:
            m.setdefault("grpo", {})["gradient_accumulation_steps"] = gas


def _one_strategy(sel: dict[str, Any]) -> None:
    """Train one strategy (the first, and its online run and controls if it has them) instead of every one: a quick
    rehearsal still runs every task, dataset and setting, in a fraction of the jobs."""
    first = (sel.get("strategies") or ["hard"])[0]
    sel["strategies"] = [first]
    sel["online_strategies"] = [s for s in sel.get("online_strategies") or [] if s == first]
    controls = {c: [s for s in strategies if s == first] for c, strategies in (sel.get("controls") or {}).items()}
    sel["controls"] = {c: strategies for c, strategies in controls.items() if strategies}  # the first's controls


def _one_model_per_class(models: dict[str, Any]) -> dict[str, Any]:
    """Quick: of the models whose stand-ins run the same code (one model class, tied or untied embeddings,
    the same settings besides the size), the first. Qwen3-4B and Qwen3-14B, or three Qwen2.5 sizes, differ
    only in sizes that a stand-in makes the same: rehearsing each again costs jobs and tests nothing more."""
    kept, seen = {}, set()
    for name, m in models.items():
        arch = config_of(m["architecture"]) or {} if m["path"] == "standin" else {}
        settings = {k: v for k, v in m.items() if k not in ("architecture", "size_b", "build")}
        if m["path"] == "build":  # every built model is built at the stand-ins' size: its warm start is what differs
            settings["build"] = {k: v for k, v in m["build"].items() if k != "arch"}
        key = json.dumps([arch.get("architectures"), arch.get("tie_word_embeddings"), settings], sort_keys=True)
        if key not in seen:
            seen.add(key)
            kept[name] = m
    return kept


def _pair_models_with_tasks(cfg: dict[str, Any]) -> None:
    """Quick: each model class on one task and each task on one model class (models.<name>.tasks), instead of
    every model on every task: a model's code (its class, chat template, adapters) and a task's (its data,
    prompt, scorer) each run once, in max(models, tasks) cells rather than their product (CI time)."""
    models, tasks = list(cfg["models"]), list(cfg["tasks"])
    if len(models) < 2 or len(tasks) < 2:
        return
    paired = {m: [] for m in models}
    for i in range(max(len(models), len(tasks))):
        paired[models[i % len(models)]].append(tasks[i % len(tasks)])
    for m, own in paired.items():
        cfg["models"][m]["tasks"] = sorted(set(own), key=tasks.index)


def rehearsal_config(source: dict[str, Any], of: str, samples: Path, base: Path = Path.cwd(),
                     quick: bool = False) -> dict[str, Any]:
    """The rehearsal of config `source` (as read from its YAML file `of`; relative paths from `base`).
    Hub splits become a few rows of their format written under `samples`. `quick`: one strategy trained
    instead of every one, and one model of each model class."""
    cfg = copy.deepcopy(source)
    if quick:
        _one_strategy(cfg.setdefault("selection", {}))
        cfg.setdefault("report", {})["regression_strategies"] = cfg["selection"]["strategies"]
    cfg["rehearsal"] = {"of": str(of), "quick": quick}
    seeds = cfg.get("seeds") or [0]
    cfg["seeds"] = [0] if isinstance(seeds, dict) else list(seeds)[:1]  # seeds repeat the same code paths
    cfg["models"] = {name: _model(name, m) for name, m in cfg["models"].items()}
    if quick:
        cfg["models"] = _one_model_per_class(cfg["models"])
        _pair_models_with_tasks(cfg)
    _splits(cfg, samples, base)
    for t in cfg["tasks"].values():
        t["scoring"] = SCORING_PREFIX + t.get("scoring", "lenient")
        t.get("probe", {}).pop("max_new_tokens", None)
        # imported pass rates name the real pool's ids, not the few rows rehearsed: the stand-in is probed
        for key in ("from", "from_note"):
            t.get("probe", {}).pop(key, None)
    cfg.setdefault("probe", {})["max_new_tokens"] = NEW_TOKENS
    _grpo(cfg.setdefault("grpo", {}), whole=True)
    for m in cfg["models"].values():
        if m.get("grpo"):
            _grpo(m["grpo"], whole=False)
    _fit_accumulation(cfg)
    ev = cfg.setdefault("evaluation", {})
    for decoding in [ev.setdefault("decoding", {}), *ev.get("overrides", {}).values()]:
        decoding["max_new_tokens"] = NEW_TOKENS
    # K probe samples under seeded rewards can leave the hardest or easiest subset unmixed by chance, where
    # the real model might not; its training rollouts, drawn afresh, mix (hardex.learnability's check runs)
    sel = cfg.setdefault("selection", {})
    online = [str(RunName(s, online=True)) for s in sel.get("online_strategies") or []]
    sel["allow_unlearnable"] = [*(sel.get("strategies") or []), *online]
    compute = cfg.setdefault("compute", {})
    # on this CPU, sized as the stand-ins are (size_b still says what the real model is, for the report)
    compute.update(gpu=0, gpu_memory_gb=None, mem_mb_per_b=0, runtime_min_per_b=0)
    report = cfg.get("report") or {}
    if report.get("reference"):
        report["reference"] = _absolute(report["reference"], base)
    return cfg


# ---- hardex-rehearse ----------------------------------------------------------------------------

def write_rehearsal(config: Path, directory: Path, quick: bool = False) -> Path:
    """Write the rehearsal of `config` (its config.yaml and sample rows) under `directory`; its config path."""
    source = yaml.safe_load(config.read_text())
    cfg = rehearsal_config(source, str(config), (directory / "samples").resolve(), quick=quick)
    out = directory / "config.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# The rehearsal of {config} (written by hardex-rehearse; edit that config, not this file):\n"
              f"# stand-in models, a few rows per dataset, short runs, seeded rewards. Its numbers are not results.\n")
    out.write_text(header + yaml.safe_dump(cfg, sort_keys=False, width=120))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hardex-rehearse", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("config", type=Path, help="the config to rehearse, e.g. experiments/hard_examples_paper.yaml")
    parser.add_argument("--dir", type=Path, help="where the rehearsal runs (default rehearsals/<config name>)")
    parser.add_argument("--quick", action="store_true",
                        help="train only the first strategy, on one model of each class "
                             "(every task and setting still runs)")
    parser.add_argument("--snakefile", type=Path, help="the workflow's Snakefile (default: ./Snakefile)")
    parser.add_argument("--no-forkserver", dest="forkserver", action="store_false",
                        help="run every job in a fresh interpreter (by default jobs fork from one process that "
                             "imported torch, transformers, PEFT and TRL once: hardex.forkserver)")
    args, snakemake_args = parser.parse_known_args(argv)
    directory = args.dir or Path("rehearsals") / args.config.stem
    try:
        snakefile = workflow_file("Snakefile", "--snakefile", args.snakefile)  # before anything is written
        written = write_rehearsal(args.config, directory, args.quick)
    except (RehearsalError, OSError, yaml.YAMLError) as e:
        print(f"hardex-rehearse: {e}", file=sys.stderr)
        return 2
    print(f"hardex-rehearse: the rehearsal of {args.config} is {written}; running it in {directory}/", file=sys.stderr)
    cores = [] if any(a in ("-c", "-j", "--cores", "--jobs") or a.startswith(("--cores=", "--jobs=")) for a in
                      snakemake_args) else ["--cores", "all"]
    workflow = ["--snakefile", str(snakefile), "--directory", str(directory), "--configfile",
                str(written.resolve()), *cores, *snakemake_args]
    dry_run = any(a in ("-n", "--dry-run", "--dryrun") for a in snakemake_args)
    if args.forkserver and not dry_run:  # a plan runs no job: nothing to preload
        return run_snakemake(workflow)
    return subprocess.call([sys.executable, "-m", "snakemake", *workflow])

