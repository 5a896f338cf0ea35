"""Pass rates imported from a file (tasks.<task>.probe.from) through Snakemake's CLI on the smoke config: data,
the imported probe table, the subsets and the pool figure, no model built or sampled; and the refusals at
planning, with nothing written."""

from __future__ import annotations

import hashlib
import json

import polars as pl
import yaml

from tests.support import SMOKE, snakemake, write_config

# the smoke pool's ids (tasks.synthetic: <family>-<split>-<seed>-<row>) and its imported counts of 8 samples: four
# examples never solved or barely (0-3 of 8) are the hardest 10 %, four always solved the easiest, the rest between
IDS = [f"swaps-pool-1-{i}" for i in range(40)]
HARDEST, EASIEST = IDS[10:14], IDS[30:34]
SUCCESSES = {i: (HARDEST.index(i) if i in HARDEST else 8 if i in EASIEST else 4 + n % 4) for n, i in enumerate(IDS)}


def imported_config(tmp_path, rates_name="rates.csv"):
    cfg = yaml.safe_load(SMOKE.read_text())
    cfg["tasks"]["swaps"]["probe"] = {"from": rates_name, "from_note": "verl run 7, temperature 1.0"}
    write_config(tmp_path, cfg)
    return cfg


def write_rates(path, rows):
    pl.DataFrame(rows).write_csv(path)


def test_the_subsets_are_chosen_by_the_imported_rates_without_a_model(tmp_path):
    cfg = imported_config(tmp_path)
    write_rates(tmp_path / "rates.csv", [{"id": i, "samples": 8, "successes": SUCCESSES[i], "source": "verl"}
                                         for i in reversed(IDS)])
    res = snakemake(tmp_path, "--cores", "2", "results/figures/pool_pass_rates.png", "results/tables/recommend.md",
                    forked=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "rule train" not in res.stdout + res.stderr  # the recommendation, like the pool figure, trains nothing
    recommend = (tmp_path / "results/tables/recommend.md").read_text()
    assert "tiny on swaps: train on " in recommend and "Predicted from the probe alone" in recommend
    assert "rule probe_from_file" in res.stdout + res.stderr and "rule probe:" not in res.stdout + res.stderr
    assert not (tmp_path / "results/models").exists()  # no model was built to be sampled
    assert "pass rates imported from rates.csv (tasks.swaps.probe.from)" in res.stderr  # the planning notice

    probe = pl.read_parquet(tmp_path / "results/probe/tiny/swaps.parquet")
    pool = pl.read_parquet(tmp_path / "results/data/swaps/pool.parquet")
    assert probe["id"].to_list() == pool["id"].to_list() == IDS  # the pool's order, whatever the file's
    assert probe.columns == ["id", "k", "n_correct", "pass_rate", "greedy_correct", "tier", "tokens",
                             "posterior_a", "posterior_b", "posterior_mean"]
    assert dict(zip(probe["id"], probe["n_correct"])) == SUCCESSES and (probe["k"] == 8).all()
    assert probe["greedy_correct"].is_null().all() and probe["tier"].to_list() == pool["tier"].cast(pl.Utf8).to_list()
    metadata = pl.read_parquet_metadata(tmp_path / "results/probe/tiny/swaps.parquet")
    imported = json.loads(metadata["hardex.probe"])["imported"]
    assert imported["sha256"] == hashlib.sha256((tmp_path / "rates.csv").read_bytes()).hexdigest()
    assert imported["note"] == "verl run 7, temperature 1.0" and imported["sources"] == ["verl"]
    samples = pl.read_parquet(tmp_path / "results/probe/tiny/swaps.samples.parquet")
    assert samples.height == 0 and samples.columns == ["id", "sample", "completion", "correct", "tokens"]

    budget = int(cfg["selection"]["budget"] * len(IDS))
    hard = pl.read_parquet(tmp_path / "results/subsets/tiny/swaps/hard/seed0.parquet")
    easy = pl.read_parquet(tmp_path / "results/subsets/tiny/swaps/easy/seed0.parquet")
    assert hard["id"].to_list() == HARDEST[:budget]  # by imported pass rate, lowest first (no ties)
    assert sorted(easy["id"]) == sorted(EASIEST[:budget])
    log = (tmp_path / "logs/probe/tiny/swaps.log").read_text()
    assert "imported from rates.csv" in log and "no model sampled" in log
    assert (tmp_path / "results/figures/pool_pass_rates.png").stat().st_size > 0
    assert (tmp_path / "results/timings/probe/tiny/swaps.tsv").exists()  # the compute table finds the stage's job

    # the same bytes written again (a copy, a checkout) rerun nothing; a changed file reruns the import and
    # what reads it
    (tmp_path / "rates.csv").write_bytes((tmp_path / "rates.csv").read_bytes())
    res = snakemake(tmp_path, "-n", "--cores", "1", "results/figures/pool_pass_rates.png")
    assert res.returncode == 0 and "Nothing to be done" in res.stdout + res.stderr, res.stdout[-3000:]
    changed = {**SUCCESSES, HARDEST[0]: 8, EASIEST[0]: 0}
    write_rates(tmp_path / "rates.csv", [{"id": i, "samples": 8, "successes": changed[i]} for i in IDS])
    res = snakemake(tmp_path, "-n", "--cores", "1", "results/figures/pool_pass_rates.png")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "rule probe_from_file" in res.stdout and "Params have changed since last execution" in res.stdout


def test_planning_refuses_ids_that_do_not_match_the_pool_and_writes_nothing(tmp_path):
    imported_config(tmp_path)
    write_rates(tmp_path / "rates.csv", [{"id": i.replace("-1-3", "-9-3"), "samples": 8, "successes": 1} for i in IDS])
    res = snakemake(tmp_path, "-n", "--cores", "1")
    errors = [x for x in (res.stdout + res.stderr).splitlines() if x.startswith("hardex: config error")]
    assert res.returncode != 0
    assert errors == ["hardex: config error: tasks.swaps.probe.from: the pass rates do not match the pool: 11 of the "
                      "pool's 40 ids are not in the file (swaps-pool-1-3, swaps-pool-1-30, swaps-pool-1-31, ...); "
                      "11 of the file's 40 ids are not in the pool "
                      "(swaps-pool-9-3, swaps-pool-9-30, swaps-pool-9-31, ...)"]
    assert not (tmp_path / "results").exists()


def test_planning_refuses_a_file_without_the_columns_or_with_impossible_counts(tmp_path):
    imported_config(tmp_path, "rates.jsonl")
    (tmp_path / "rates.jsonl").write_text("".join(json.dumps({"id": i, "k": 8, "n_correct": 1}) + "\n" for i in IDS))
    res = snakemake(tmp_path, "-n", "--cores", "1")
    assert res.returncode != 0 and ("hardex: config error: tasks.swaps.probe.from: rates.jsonl: no column 'samples', "
                                    "'successes' (it has id, k, n_correct)") in res.stderr
    rows = [{"id": i, "samples": 8, "successes": 9 if n < 5 else 1} for n, i in enumerate(IDS)]
    (tmp_path / "rates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = snakemake(tmp_path, "-n", "--cores", "1")
    assert res.returncode != 0 and ("hardex: config error: tasks.swaps.probe.from: rates.jsonl: 5 of 40 rows have "
                                    "successes above samples (ids swaps-pool-1-0, swaps-pool-1-1, swaps-pool-1-2, ...)"
                                    ) in res.stderr
    assert not (tmp_path / "results").exists()
