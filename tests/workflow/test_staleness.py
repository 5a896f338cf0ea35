"""Edit one config key of a finished run: Snakemake plans exactly the jobs that depend on it.

Every value that changes a result reaches its rule through `params:`, so Snakemake's params
trigger decides what is stale. Each case asserts the exact set of planned jobs (rule + wildcards).
"""

from __future__ import annotations

import re

import pytest
import yaml

from tests.support import snakemake

STRATEGIES = ("hard", "easy", "random")  # the smoke config's subsets
# and its runs: online_strategies [hard] and controls of hard train hard's subset three more times
RUNS = (*STRATEGIES, "hard_online", "hard_random_reward", "hard_format")


def planned(workdir, *extra) -> set[str]:
    """The jobs a dry run plans, as 'rule[wildcards]' strings (rule all left out)."""
    res = snakemake(workdir, "-n", "--cores", "1", *extra)
    assert res.returncode == 0, res.stderr[-3000:]
    jobs, rule = set(), None
    for line in res.stdout.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):$", line.strip())
        if m:
            if rule and rule != "all":
                jobs.add(f"{rule}[]")
            rule = m.group(1)
            continue
        m = re.match(r"^wildcards: (.*)$", line.strip())
        if m and rule:
            if rule != "all":
                jobs.add(f"{rule}[{m.group(1)}]")
            rule = None
    if rule and rule != "all":
        jobs.add(f"{rule}[]")
    return jobs


def job(rule, strategy=None, **extra):
    wc = {"model": "tiny", "task": "swaps"}
    if strategy:
        wc.update(strategy=strategy)
    if rule in ("select", "train", "evaluate_run"):
        wc.update(seed="0")
    return f"{rule}[{', '.join(f'{k}={v}' for k, v in {**wc, **extra}.items())}]"


def runs(*rules, strategies=None):
    """The jobs of `rules` per strategy: subsets for select, runs for train and evaluate_run."""
    return {job(r, s) for r in rules for s in strategies or (STRATEGIES if r == "select" else RUNS)}


@pytest.fixture
def finished(smoke_copy):
    return smoke_copy


@pytest.fixture(scope="module")
def downstream(smoke_run):
    """Report jobs downstream of a rule: what `--forcerun RULE` plans, the oracle for each case."""
    cache = {}

    def report_jobs_after(rule):
        if rule not in cache:
            cache[rule] = {j for j in planned(smoke_run, "--forcerun", rule) if j.startswith("report")}
            assert cache[rule], f"no report job depends on {rule}"
        return cache[rule]

    return report_jobs_after


def edit(work, change):
    path = work / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    change(cfg)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))


def test_nothing_to_do_after_a_finished_run(finished):
    assert planned(finished) == set()


def test_comment_and_key_order_change_nothing(finished):
    path = finished / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    reordered = dict(reversed(list(cfg.items())))
    reordered["grpo"] = dict(reversed(list(cfg["grpo"].items())))
    path.write_text("# a comment a user added\n" + yaml.safe_dump(reordered, sort_keys=False))
    assert planned(finished) == set()


@pytest.mark.parametrize("change", [{"k": 5}, {"temperature": 0.7}], ids=["k", "temperature"])
def test_probe_settings_rerun_probe_select_train_evaluate_report(finished, downstream, change):
    edit(finished, lambda c: c["probe"].update(change))
    expected = {job("probe")} | runs("select", "train", "evaluate_run") | downstream("probe")
    assert planned(finished) == expected


def test_learning_rate_reruns_train_evaluate_report_only(finished, downstream):
    edit(finished, lambda c: c["grpo"].update(learning_rate=3e-4))
    assert planned(finished) == runs("train", "evaluate_run") | downstream("train")


def test_budget_reruns_select_onward(finished, downstream):
    edit(finished, lambda c: c["selection"].update(budget=0.2))
    assert planned(finished) == runs("select", "train", "evaluate_run") | downstream("select")


def test_settings_of_strategies_not_run_rerun_nothing(finished):
    """The band window and the group size that learnable ranks by reach only those strategies' select
    jobs: the smoke config has neither, so a new window reruns nothing (it once reran every select)."""
    edit(finished, lambda c: c["selection"].update(band=[0.2, 0.8]))
    assert planned(finished) == set()


def test_adding_a_strategy_runs_only_its_jobs_and_the_report(finished, downstream):
    edit(finished, lambda c: c["selection"]["strategies"].append("medium"))
    expected = runs("select", "train", "evaluate_run", strategies=["medium"]) | downstream("select")
    assert planned(finished) == expected


def test_a_rebuilt_model_reuses_no_probe_chunk_and_no_checkpoint(finished):
    """Editing the warm start rebuilds the model under the same path. Its probe chunks and checkpoints
    were once keyed by that path: the probe reused the old model's chunks and every run 'resumed' at its
    last checkpoint, training nothing, while the base evaluation used the new model."""
    edit(finished, lambda c: c["models"]["tiny"]["build"]["warmstart"].update(learning_rate=4e-3))
    res = snakemake(finished, "--cores", "2",
                    *[f"results/train/tiny/swaps/{s}/seed0/steps.parquet" for s in STRATEGIES], forked=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    probe_log = (finished / "logs/probe/tiny/swaps.log").read_text()
    assert ": probed " in probe_log and ": reused " not in probe_log
    for strategy in STRATEGIES:
        log = (finished / f"logs/train/tiny/swaps/{strategy}/seed0.log").read_text()
        assert "starting afresh" in log and "training from the base model" in log and "resuming" not in log


def test_new_questions_under_old_ids_are_probed_again(finished):
    """A synthetic pool of another difficulty has new questions under the same ids: its chunk is new work."""
    edit(finished, lambda c: c["datasets"]["swaps"]["splits"]["pool"].update(difficulty=[2, 3]))
    res = snakemake(finished, "--cores", "2", "results/probe/tiny/swaps.parquet", forked=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    probe_log = (finished / "logs/probe/tiny/swaps.log").read_text()
    assert ": probed " in probe_log and ": reused " not in probe_log


def test_a_damaged_result_table_is_named_by_the_job_that_reads_it(finished):
    probe = finished / "results/probe/tiny/swaps.parquet"
    with open(probe, "r+b") as fh:
        fh.truncate(probe.stat().st_size // 2)
    # --force remakes the target alone (--forcerun select ran every select job, in an order that varies)
    res = snakemake(finished, "--cores", "1", "--force", "results/subsets/tiny/swaps/hard/seed0.parquet", forked=True)
    assert res.returncode != 0
    log = (finished / "logs/select/tiny/swaps/hard/seed0.log").read_text()
    assert f"{probe.relative_to(finished)}: damaged or incomplete" in log and "run snakemake again" in log


def test_base_pass_k_reruns_the_base_evaluation_and_the_report_only(finished, downstream):
    """evaluation.base_pass_k reaches only the base's params (and null, the default, reaches none)."""
    edit(finished, lambda c: c["evaluation"].update(base_pass_k=8))
    assert planned(finished) == {job("evaluate_base")} | downstream("evaluate_base")


def test_greedy_beside_sampling_reruns_every_evaluation_and_the_report(finished, downstream):
    edit(finished, lambda c: c["evaluation"].update(greedy=True))
    expected = {job("evaluate_base")} | runs("evaluate_run") | downstream("evaluate_base") | downstream("evaluate_run")
    assert planned(finished) == expected
