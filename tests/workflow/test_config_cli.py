"""Snakemake's own CLI refuses a bad config before any job, in one line that names the key."""

from __future__ import annotations

import pytest
import yaml

from tests.support import snakemake, with_key, write_config

CASES = [
    ("selection.strategies", ["hard", "hardest"], "selection.strategies.1: 'hardest' is not allowed"),
    ("selection.budget", -0.1, "selection.budget: -0.1 is out of range; must be > 0 and <= 1"),
    ("probe.k", 0, "probe.k: 0 is out of range; must be >= 1"),
    ("models", ..., "models: required key is missing"),
]


@pytest.mark.parametrize("path,value,message", CASES)
def test_snakemake_refuses_bad_config_in_one_line(tmp_path, smoke_config, path, value, message):
    res = snakemake(tmp_path, "-n", "--cores", "1",
                    configfile=write_config(tmp_path, with_key(smoke_config, path, value)))
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert f"hardex: config error: {message}" in out
    assert "Traceback" not in out
    assert not (tmp_path / "results").exists()


def test_a_name_defined_twice_is_refused(tmp_path, smoke_config):
    text = (tmp_path / "c.yaml")
    body = yaml.safe_dump(smoke_config, sort_keys=False)
    text.write_text(body.replace("models:\n", "models:\n  tiny:\n    path: build\n", 1))
    res = snakemake(tmp_path, "-n", "--cores", "1", configfile=text)
    assert res.returncode != 0
    assert "hardex: config error: c.yaml line" in res.stderr and "'tiny' is defined twice" in res.stderr


def test_subset_smaller_than_a_step_is_refused_before_any_job(tmp_path, smoke_config):
    """The silent failure this prevents: TRL makes no step from a subset smaller than prompts_per_step,
    the train job saves checkpoint-0 and succeeds, and the report shows a gain of about 0."""
    res = snakemake(tmp_path, "-n", "--cores", "1",
                    configfile=write_config(tmp_path, with_key(smoke_config, "grpo.prompts_per_step", 8)))
    assert res.returncode != 0
    lines = [line for line in (res.stdout + res.stderr).splitlines() if "hardex: config error" in line]
    assert len(lines) == 1 and "repeat_small_subsets: true" in lines[0] and "selection.budget" in lines[0]
    assert not (tmp_path / "results").exists()


def test_a_control_plans_its_train_and_evaluate_jobs_on_its_strategys_subset(tmp_path, smoke_config):
    cfg = with_key(smoke_config, "selection.strategies", ["hard", "easy", "random", "full"])
    cfg = with_key(cfg, "selection.controls", {"format": ["full"]})
    res = snakemake(tmp_path, "-n", "--cores", "1", configfile=write_config(tmp_path, cfg))
    assert res.returncode == 0, res.stderr
    out = res.stdout + res.stderr
    assert "output: results/train/tiny/swaps/full_format/seed0/steps.parquet" in out
    assert "output: results/eval/tiny/swaps/full_format/seed0.parquet" in out
    train = next(block for block in out.split("\n\n")
                 if "wildcards: model=tiny, task=swaps, strategy=full_format" in block and "rule train:" in block)
    assert "results/subsets/tiny/swaps/full/seed0.parquet" in train  # the subset of the strategy it controls
    assert "subsets/tiny/swaps/full_format" not in out


def test_a_model_runs_only_its_own_tasks(tmp_path, smoke_config):
    """models.<name>.tasks: a model probed, trained and evaluated on some tasks only; a second model on the
    other (e.g. a large model on one benchmark). A task it does not name gets no job of that model."""
    cfg = with_key(smoke_config, "tasks.arith", {"pool": "arith/pool", "benchmarks": ["arith/test"]})
    cfg["models"]["other"] = {**cfg["models"]["tiny"], "tasks": ["arith"]}
    cfg["models"]["tiny"]["tasks"] = ["swaps"]
    res = snakemake(tmp_path, "-n", "--cores", "1", configfile=write_config(tmp_path, cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout + res.stderr
    assert "results/probe/tiny/swaps.parquet" in out and "results/probe/other/arith.parquet" in out
    assert "results/probe/tiny/arith" not in out and "results/probe/other/swaps" not in out
    assert "results/eval/other/arith/hard/seed0.parquet" in out and "results/eval/tiny/arith" not in out
    # a task that is no task of the config: refused in one line naming the key
    bad = with_key(cfg, "models.other.tasks", ["arithmetic"])
    res = snakemake(tmp_path, "-n", "--cores", "1", configfile=write_config(tmp_path, bad))
    assert res.returncode != 0 and "hardex: config error: models.other.tasks: 'arithmetic' is no task" in res.stderr


def test_a_yaml_mistake_in_the_embedded_default_names_its_file_line_and_column(tmp_path):
    """Issue 61: a YAML syntax error in config.yaml said only "Config file is not valid JSON or YAML". The embedded
    default is read by the Snakefile (a --configfile is read by Snakemake before it, and keeps Snakemake's message):
    a copy of the workflow whose config.yaml has an unclosed list."""
    import os
    import subprocess
    import sys

    from tests.support import ROOT, RUN_ENV

    workflow = tmp_path / "workflow"
    workflow.mkdir()
    for name in ("Snakefile", "rules", "src", "report", "profiles"):
        (workflow / name).symlink_to(ROOT / name)
    text = (ROOT / "config.yaml").read_text()
    assert "\n  budget: 0.1" in text
    broken = text.replace("\n  budget: 0.1", "\n  budget: [0.1", 1)
    (workflow / "config.yaml").write_text(broken)
    line = broken[: broken.index("budget: [0.1")].count("\n") + 1
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1"], capture_output=True, text=True,
                         cwd=workflow, env={**os.environ, **RUN_ENV}, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "Traceback" not in out, out[-3000:]
    import re

    found = re.search(r"hardex: config error: config.yaml line (\d+), column \d+: .*while parsing a flow sequence", out)
    assert found and int(found.group(1)) in (line, line + 1), out[-3000:]  # the parser stops at the next token
