"""Pass rates computed elsewhere (tasks.<task>.probe.from): the file read and refused by hardex.imported_probe,
the probe table it becomes and what selection and learnability make of it, and the config's planning checks."""

from __future__ import annotations

import copy
import hashlib
import json

import polars as pl
import pytest

from hardex.config import ConfigError, check_config
from hardex.imported_probe import ImportedRatesError, check_ids, imported_provenance, probe_table, read_rates
from hardex.learnability import UnlearnableSubsetError, check_learnable, with_probe_posterior
from hardex.posterior import with_posterior
from hardex.selection import select
from hardex.settings import sampling_notices
from hardex.tasks import get_task
from tests.support import ROOT

KEY = "tasks.t.probe.from"
ROWS = [{"id": "a", "samples": 8, "successes": 0}, {"id": "b", "samples": 8, "successes": 3},
        {"id": "c", "samples": 4, "successes": 4}]
#: the columns and types of hardex's own probe table, before its posterior columns (hardex.probing, hardex.adaptive)
PROBE_SCHEMA = {"id": pl.Utf8, "k": pl.Int64, "n_correct": pl.Int64, "pass_rate": pl.Float64,
                "greedy_correct": pl.Boolean, "tier": pl.Utf8, "tokens": pl.Int64}


def write(tmp_path, rows, suffix=".csv", name="rates"):
    path = tmp_path / f"{name}{suffix}"
    df = pl.DataFrame(rows)
    if suffix == ".csv":
        df.write_csv(path)
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        df.write_parquet(path)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_each_format_reads_to_the_same_counts(tmp_path, suffix):
    rates = read_rates(write(tmp_path, ROWS, suffix), KEY)
    assert rates.to_dicts() == ROWS
    assert rates.schema == {"id": pl.Utf8, "samples": pl.Int64, "successes": pl.Int64}


def test_ids_are_text_as_written_and_whole_floats_are_counts(tmp_path):
    path = tmp_path / "rates.csv"
    path.write_text("id,samples,successes,extra\n007,8.0,2.0,x\n12,8,8,y\n")
    rates = read_rates(path, KEY)
    assert rates["id"].to_list() == ["007", "12"] and rates["samples"].to_list() == [8, 8]
    jsonl = write(tmp_path, [{"id": 7, "samples": 2, "successes": 1}], ".jsonl")
    assert read_rates(jsonl, KEY)["id"].to_list() == ["7"]


BAD_FILES = [  # (rows, the refusal)
    ([{"id": "a", "samples": 8}], r"^tasks.t.probe.from: .*rates.csv: no column 'successes' \(it has id, samples\); "
                                  r"a pass-rate file has id, samples, successes"),
    ([{"id": "a", "samples": 8, "successes": 9}, {"id": "b", "samples": 4, "successes": 5}],
     r"^tasks.t.probe.from: .*: 2 of 2 rows have successes above samples \(ids a, b\)$"),
    ([{"id": "a", "samples": 8, "successes": -1}], r": 1 of 1 rows have successes below 0 \(ids a\)$"),
    ([{"id": "a", "samples": 0, "successes": 0}], r": 1 of 1 rows have samples below 1 \(ids a\)$"),
    ([{"id": i, "samples": 8.0, "successes": 2.5} for i in "abcde"],
     r": 5 rows have a successes that is not a whole number \(ids a, b, c, \.\.\.\)$"),
    ([{"id": "a", "samples": "eight", "successes": 1}], r": column 'samples' holds String, not counts$"),
    ([{"id": "a", "samples": 8, "successes": 1}, {"id": "a", "samples": 8, "successes": 2}],
     r": 1 ids are given more than once \(a\)$"),
    ([{"id": "a", "samples": 8, "successes": 1, "greedy_correct": 2}],
     r": column 'greedy_correct' must be true/false or 1/0"),
]


@pytest.mark.parametrize("rows, message", BAD_FILES)
def test_a_bad_file_is_refused_in_one_line_naming_the_key(tmp_path, rows, message):
    with pytest.raises(ImportedRatesError, match=message) as err:
        read_rates(write(tmp_path, rows), KEY)
    assert "\n" not in str(err.value)


def test_a_missing_file_or_an_unknown_format_is_refused(tmp_path):
    with pytest.raises(ImportedRatesError, match=r"^tasks.t.probe.from: .*nope.csv does not exist"):
        read_rates(tmp_path / "nope.csv", KEY)
    (tmp_path / "rates.tsv").write_text("id\tsamples\tsuccesses\n")
    with pytest.raises(ImportedRatesError, match=r"rates.tsv: a pass-rate file is CSV \(.csv\), JSON lines"):
        read_rates(tmp_path / "rates.tsv", KEY)


def test_ids_that_do_not_match_the_pool_are_refused_with_both_counts(tmp_path):
    rates = read_rates(write(tmp_path, ROWS), KEY)
    check_ids(rates, ["c", "b", "a"], KEY)  # every pool id once, in any order
    with pytest.raises(ImportedRatesError) as err:
        check_ids(rates, ["a", "b", "x", "y", "z", "w"], KEY)
    assert str(err.value) == ("tasks.t.probe.from: the pass rates do not match the pool: 4 of the pool's 6 ids are "
                              "not in the file (x, y, z, ...); 1 of the file's 3 ids are not in the pool (c)")


def test_the_probe_table_has_the_probes_columns_in_the_pools_order(tmp_path):
    rates = read_rates(write(tmp_path, ROWS), KEY)
    pool = pl.DataFrame({"id": ["c", "a", "b"], "question": ["q"] * 3, "answer": ["1"] * 3, "tier": [2, 1, 1]})
    table = probe_table(rates, pool, KEY)
    assert table.schema == PROBE_SCHEMA
    assert table["id"].to_list() == ["c", "a", "b"] and table["tier"].to_list() == ["2", "1", "1"]
    assert table["pass_rate"].to_list() == [1.0, 0.0, 3 / 8] and table["k"].to_list() == [4, 8, 8]
    assert table["greedy_correct"].is_null().all() and table["tokens"].is_null().all()  # the file does not say
    with pytest.raises(ImportedRatesError, match="1 of the pool's 4 ids are not in the file"):
        probe_table(rates, pl.concat([pool, pool.head(1).with_columns(id=pl.lit("d"))]), KEY)


def test_provenance_names_the_file_its_hash_the_note_and_the_sources(tmp_path):
    path = write(tmp_path, [{**r, "source": "verl step 200"} for r in ROWS])
    rates = read_rates(path, KEY)
    counts, prior = with_posterior(probe_table(rates, pl.DataFrame({"id": ["a", "b", "c"]}), KEY))
    p = imported_provenance(path, "Qwen3-4B, T = 1", rates, prior)
    assert p["imported"] == {"file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                             "note": "Qwen3-4B, T = 1", "sources": ["verl step 200"], "greedy": False}
    assert p["k"] is None and p["temperature"] is None and p["model_fingerprint"] is None  # K varies; sampling unknown
    assert set(counts.columns) == {*PROBE_SCHEMA, "posterior_a", "posterior_b", "posterior_mean"}


def pool_and_rates(tmp_path, successes, greedy=None):
    ids = [f"p{i}" for i in range(len(successes))]
    rows = [{"id": i, "samples": 8, "successes": s} for i, s in zip(ids, successes)]
    if greedy is not None:
        rows = [{**r, "greedy_correct": int(g)} for r, g in zip(rows, greedy)]
    rates = read_rates(write(tmp_path, rows), KEY)
    return with_posterior(probe_table(rates, pl.DataFrame({"id": ids}), KEY))[0]


def test_selection_and_learnability_read_imported_rates_as_probed_ones(tmp_path):
    probe = pool_and_rates(tmp_path, [5, 0, 7, 1, 8, 3, 6, 2, 4, 8])
    hard = select(probe, "hard", 0.3, seed=0)
    assert hard["id"].to_list() == ["p1", "p3", "p7"]  # successes 0, 1, 2
    assert set(select(probe, "easy", 0.2, seed=0)["id"]) == {"p4", "p9"}
    learnable = with_probe_posterior(select(probe, "learnable", 0.3, seed=0, group_size=8), probe)
    assert "expected share of mixed groups" in check_learnable(learnable, "learnable", False, group_size=8)
    never = pool_and_rates(tmp_path, [0] * 30)
    with pytest.raises(UnlearnableSubsetError):
        check_learnable(with_probe_posterior(select(never, "hard", 0.2, seed=0), never), "hard", False, group_size=8)


def test_base_splits_read_the_files_greedy_answers(tmp_path):
    probe = pool_and_rates(tmp_path, [0, 1, 6, 8], greedy=[0, 0, 1, 1])
    assert probe["greedy_correct"].to_list() == [False, False, True, True]
    assert set(select(probe, "base_wrong", 0.5, seed=0)["id"]) == {"p0", "p1"}
    assert set(select(probe, "base_right", 0.5, seed=0)["id"]) == {"p2", "p3"}


# ---- the config's planning checks (hardex.config) ----


def imported(smoke_config, path, **probe):
    cfg = copy.deepcopy(smoke_config)
    cfg["tasks"]["swaps"]["probe"] = {"from": str(path), **probe}
    return cfg


def smoke_pool_ids(smoke_config):
    spec = smoke_config["datasets"]["swaps"]["splits"]["pool"]
    return get_task("swaps").load_split({"name": "pool", **spec})["id"].to_list()


def test_a_file_matching_a_generated_pool_is_accepted_with_a_notice(smoke_config, tmp_path):
    ids = smoke_pool_ids(smoke_config)
    path = write(tmp_path, [{"id": i, "samples": 4, "successes": n % 5} for n, i in enumerate(ids)])
    cfg = check_config(imported(smoke_config, path, from_note="verl run 3"))
    assert sampling_notices(cfg) == [f"swaps: pass rates imported from {path} (tasks.swaps.probe.from): how they were "
                                     f"sampled is not known here; they describe GRPO's groups only if that run sampled "
                                     f"as GRPO does"]


PLANNING_REFUSALS = [  # (the file's rows from the pool's ids, extra probe keys, strategies, refusal)
    (lambda ids: [{"id": i, "samples": 4, "successes": 1} for i in ids[1:] + ["extra-1"]], {}, None,
     r"^tasks.swaps.probe.from: the pass rates do not match the pool: 1 of the pool's 40 ids are not in the file "
     r"\(swaps-pool-1-0\); 1 of the file's 40 ids are not in the pool \(extra-1\)$"),
    (lambda ids: [{"id": i, "samples": 4, "n_correct": 1} for i in ids], {}, None,
     r"^tasks.swaps.probe.from: .*: no column 'successes'"),
    (lambda ids: [{"id": i, "samples": 4, "successes": 1} for i in ids], {"k": 4}, None,
     r"^tasks.swaps.probe.k: the task's pass rates are imported \(tasks.swaps.probe.from\), nothing is sampled"),
    (lambda ids: [{"id": i, "samples": 4, "successes": 1} for i in ids], {}, ["hard", "base_wrong", "full"],
     r"^tasks.swaps.probe.from: selection.strategies base_wrong split the pool by the base model's greedy answer, "
     r"which .* does not give \(no greedy_correct column\)"),
]


@pytest.mark.parametrize("rows, probe, strategies, message", PLANNING_REFUSALS)
def test_planning_refuses_what_the_file_and_the_config_show(smoke_config, tmp_path, rows, probe, strategies, message):
    path = write(tmp_path, rows(smoke_pool_ids(smoke_config)))
    cfg = imported(smoke_config, path, **probe)
    if strategies:
        cfg["selection"].update(strategies=strategies, online_strategies=[], controls={}, allow_unlearnable=[])
    with pytest.raises(ConfigError, match=message):
        check_config(cfg)


def test_the_greedy_strategies_are_accepted_with_a_greedy_column(smoke_config, tmp_path):
    ids = smoke_pool_ids(smoke_config)
    path = write(tmp_path, [{"id": i, "samples": 4, "successes": n % 5, "greedy_correct": n % 2 == 0}
                            for n, i in enumerate(ids)])
    cfg = imported(smoke_config, path)
    cfg["selection"].update(strategies=["base_wrong", "base_right", "matched_random"], online_strategies=[],
                            controls={}, allow_unlearnable=[])
    check_config(cfg)


def test_one_models_rates_for_one_model_and_a_note_needs_a_file(smoke_config, tmp_path):
    ids = smoke_pool_ids(smoke_config)
    path = write(tmp_path, [{"id": i, "samples": 4, "successes": 1} for i in ids])
    cfg = imported(smoke_config, path)
    cfg["models"]["other"] = copy.deepcopy(cfg["models"]["tiny"])
    with pytest.raises(ConfigError, match=r"^tasks.swaps.probe.from: the file holds one model's pass rates, but "
                                          r"models tiny, other run task 'swaps'"):
        check_config(cfg)
    cfg = copy.deepcopy(smoke_config)
    cfg["tasks"]["swaps"]["probe"] = {"from_note": "verl"}
    with pytest.raises(ConfigError, match=r"^tasks.swaps.probe.from_note: .* but tasks.swaps.probe.from names no file"):
        check_config(cfg)


def test_a_hub_pool_is_matched_in_the_job_not_at_planning(smoke_config, tmp_path):
    """The pool's ids of a hub split are not known before its job: planning checks the file alone."""
    cfg = copy.deepcopy(smoke_config)
    cfg["datasets"]["g"] = {"family": "gsm8k", "splits": {s: {"hub": "openai/gsm8k", "config": "main", "split": s}
                                                          for s in ("train", "test")}}
    cfg["tasks"] = {"g": {"pool": "g/train", "benchmarks": ["g/test"],
                          "probe": {"from": str(write(tmp_path, [{"id": "x", "samples": 5, "successes": 1}]))}}}
    check_config(copy.deepcopy(cfg))
    cfg["tasks"]["g"]["probe"]["from"] = str(write(tmp_path, [{"id": "x", "samples": 5, "successes": 6}], name="b"))
    with pytest.raises(ConfigError, match="successes above samples"):
        check_config(cfg)


def test_the_captions_say_which_tasks_rates_were_imported(smoke_config, tmp_path):
    """The pool figure's caption and the report's front page, rendered as Snakemake renders them (Jinja with
    trim_blocks and lstrip_blocks, then docutils)."""
    from docutils.core import publish_parts
    from jinja2 import Environment

    env = Environment(trim_blocks=True, lstrip_blocks=True)
    params = {"provenance": {"configfile": "c.yaml", "budget": 0.1, "strategies": ["hard"]}, "style": {}}
    for task_probe, shown in (({"from": "rates.csv", "from_note": "verl run 3"}, True), (None, False)):
        cfg = check_config(copy.deepcopy(smoke_config))
        if task_probe:
            cfg["tasks"]["swaps"]["probe"] = task_probe

        class Snakemake:
            config = cfg

        Snakemake.params = type("Params", (), params)
        pool = env.from_string((ROOT / "report/figures/pool_pass_rates.rst").read_text()).render(snakemake=Snakemake)
        front = env.from_string((ROOT / "report/workflow.rst").read_text()).render(snakemake=Snakemake)
        html = publish_parts(pool, writer="html")["body"] + publish_parts(front, writer="html")["body"]
        assert ("pass rates imported from" in html) == shown
        if shown:
            assert "verl run 3" in pool and "tasks.swaps.probe.from" in pool


def test_the_memory_plan_has_no_probe_job_where_every_task_imports_its_rates(smoke_config, tmp_path):
    """No probe job loads the model for imported rates: a plan that sized one could refuse a run that fits."""
    from hardex.memory_plan import plan

    ids = smoke_pool_ids(smoke_config)
    path = write(tmp_path, [{"id": i, "samples": 4, "successes": n % 5} for n, i in enumerate(ids)])
    probed = {p.kind for p in plan(check_config(copy.deepcopy(smoke_config)))}
    imported_kinds = {p.kind for p in plan(check_config(imported(smoke_config, path)))}
    assert "probe" in probed and imported_kinds == probed - {"probe"}
