"""A sequential design through Snakemake's own CLI (seeds: {first, batch, max}; rules/sequential.smk): the
first batch trains every run, a look names the runs still needed, and only those train the next batch."""

from __future__ import annotations

import json
import re

import polars as pl
import yaml

from tests.support import snakemake


def planned_runs(workdir, *targets) -> set[tuple[str, str]]:
    """(rule, wildcards) of the train and evaluate_run jobs a dry run (of `targets`, or all) plans."""
    res = snakemake(workdir, "-n", "--cores", "1", *targets)  # targets after an option: --configfile takes many
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    jobs, rule = set(), None
    for line in res.stdout.splitlines():
        m = re.match(r"^(?:local)?(?:rule|checkpoint) (\w+):$", line.strip())
        if m:
            rule = m.group(1)
        m = re.match(r"^wildcards: (.*)$", line.strip())
        if m and rule in ("train", "evaluate_run", "sequential_look"):
            jobs.add((rule, m.group(1)))
    return jobs


def test_a_look_sends_the_next_batch_only_to_the_runs_still_undecided(smoke_copy):
    work = smoke_copy
    cfg = yaml.safe_load((work / "config.yaml").read_text())
    # the finished smoke run has seed 0 of every run: two strategies, a design of 2 seeds, then 1 more, up to 3
    cfg["selection"].update(strategies=["hard", "random"], online_strategies=[], controls={},
                            allow_unlearnable=["hard", "random"])
    cfg["seeds"] = {"first": 2, "batch": 1, "max": 3}
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))

    # before the first look: the first batch (seed 1 is new) and look 1; nothing of seed 2
    before = planned_runs(work)
    trained = {w for r, w in before if r == "train"}
    assert trained == {f"model=tiny, task=swaps, strategy={s}, seed=1" for s in ("hard", "random")}, before
    assert ("sequential_look", "look=1") in before
    # the recommendation and the pool figure, from the probe alone, read the first batch's subsets: they wait for
    # no look and no training
    assert planned_runs(work, "results/tables/recommend.md", "results/figures/pool_pass_rates.png") == set()

    res = snakemake(work, "--cores", "2", "results/sequential/look1.json", forked=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    look1 = json.loads((work / "results/sequential/look1.json").read_text())
    names = {(v["strategy"], v["versus"]) for v in look1["verdicts"]}
    assert names == {("hard", "base"), ("random", "base"), ("hard", "random")}  # the default deciding pairs
    assert all(v["seeds"] == 2 and v["look"] == 1 for v in look1["verdicts"])

    # the look leaves only `hard` undecided: only hard trains seed 2 (as a look that decided the others would)
    look1["needs_seeds"] = {"tiny": {"swaps": ["hard"]}}
    look1["next_seeds"] = [2]
    (work / "results/sequential/look1.json").write_text(json.dumps(look1))
    after = planned_runs(work)
    assert {w for r, w in after if r == "train"} == {"model=tiny, task=swaps, strategy=hard, seed=2"}, after

    # to the end: the last look (the maximum) and the verdict table (the rest of the report as before)
    res = snakemake(work, "--cores", "2", "results/tables/sequential.csv", forked=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert not (work / "results/eval/tiny/swaps/random/seed2.parquet").exists()
    look2 = json.loads((work / "results/sequential/look2.json").read_text())
    assert look2["seeds"] == 3 and look2["next_seeds"] == []
    table = pl.read_csv(work / "results/tables/sequential.csv")
    assert table.height == 3 and set(table["verdict"]) <= {"differs", "equivalent within ±5", "undecided at 2 seeds",
                                                           "undecided at 3 seeds", "differs, within ±5"}
    assert "Sequential design" in (work / "results/tables/sequential.md").read_text()
    assert planned_runs(work) == set()  # finished: no run trains or evaluates again, no look is taken again
