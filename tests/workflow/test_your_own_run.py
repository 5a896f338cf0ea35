"""docs/your-own-run.md's two configs plan as the page says: a hub model, a JSONL pool of the user's own
questions and GSM8K's test split on one 8-GPU node, and the same through the page's Slurm site profile.
Planning only (`snakemake -n`): no model, dataset or cluster is reached."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import ROOT, RUN_ENV, snakemake, stub_hub_cache
from tests.workflow.test_experiments import check_counts, grid_counts, job_stats

PAGE = ROOT / "docs" / "your-own-run"
NODE = PAGE / "node.yaml"


def own_run_dir(tmp_path: Path, questions: int) -> Path:
    """A working directory as the page sets it up: node.yaml beside the user's my_questions.jsonl, in the
    page's column names."""
    shutil.copy(NODE, tmp_path / "node.yaml")
    with open(tmp_path / "my_questions.jsonl", "w") as f:
        for i in range(questions):
            f.write(json.dumps({"uid": f"q{i}", "problem": f"What is {i} + {i + 3}?",
                                "solution": str(2 * i + 3)}) + "\n")
    return tmp_path


@pytest.fixture(autouse=True)
def hub_cache(tmp_path_factory, monkeypatch):
    """The model as an offline host with it fetched would have it (its config.json is what planning reads)."""
    models = [m["path"] for m in yaml.safe_load(NODE.read_text())["models"].values()]
    monkeypatch.setenv("HF_HUB_CACHE", str(stub_hub_cache(tmp_path_factory.mktemp("hub"), models)))


def test_the_node_config_plans_its_grid_with_memory_and_time(tmp_path):
    work = own_run_dir(tmp_path, 2000)
    res = snakemake(work, "-n", configfile=work / "node.yaml", timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    grid = {r: n for r, n in job_stats(out).items()}
    check_counts(grid, grid_counts(yaml.safe_load(NODE.read_text())))
    # the memory plan of a 1.5B model on an 80 GB GPU, printed at planning
    assert "qwen" in out and "fits" in out.lower(), out[-4000:]


def test_a_pool_too_small_for_a_step_is_refused_naming_the_key(tmp_path):
    """The page's warning: with 32 prompts a step, a 10 % subset needs a pool of 320 questions."""
    work = own_run_dir(tmp_path, 200)
    res = snakemake(work, "-n", configfile=work / "node.yaml", timeout=300)
    assert res.returncode != 0
    assert "prompts_per_step" in res.stderr and "hard" in res.stderr, res.stderr[-3000:]


def test_the_site_profile_plans_through_the_slurm_executor(tmp_path):
    """The site profile is Snakemake's: it selects the Slurm executor and its resources reach the jobs."""
    work = own_run_dir(tmp_path, 2000)
    profile = tmp_path / "site-profile"
    shutil.copytree(PAGE / "site-profile", profile)
    res = snakemake(work, "-n", "--profile", str(profile), configfile=work / "node.yaml", timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert job_stats(out)["train"] == grid_counts(yaml.safe_load(NODE.read_text()))["train"]


def page_commands() -> list[str]:
    """The snakemake command lines of the page's bash blocks, as a user copies them (comments dropped)."""
    text = (ROOT / "docs" / "your-own-run.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith("snakemake ")]


def test_the_pages_commands_plan_as_typed_in_the_study_folder(tmp_path):
    """issue 61: the page's Slurm commands had no -s and stopped with "No Snakefile found" in the study folder.
    Each command runs in a shell from the study folder, as typed, with the checkout for /path/to/hardex and
    -n added where the page runs the study (a plan submits and trains nothing)."""
    commands = page_commands()
    assert len(commands) >= 4, commands
    (tmp_path / "my-study").mkdir()
    study = own_run_dir(tmp_path / "my-study", 2000)
    shutil.copytree(PAGE / "site-profile", study / "site-profile")
    env = {**os.environ, **RUN_ENV, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for command in commands:
        typed = command.replace("/path/to/hardex", str(ROOT))
        if "--report" in typed:  # the report of a finished study: here that it names the workflow and the config
            assert f"-s {ROOT}/Snakefile" in typed and "--configfile node.yaml" in typed, command
            continue
        planned = typed if " -n " in f"{typed} " else f"{typed} -n"
        res = subprocess.run(["bash", "-c", planned], cwd=study, env=env, capture_output=True, text=True, timeout=300)
        out = res.stdout + res.stderr
        assert res.returncode == 0 and "Job stats" in out, f"{command}\n{out[-3000:]}"
