"""A real `snakemake` run of data -> model -> probe -> select on the smoke config."""

from __future__ import annotations

import polars as pl
import yaml

from tests.support import snakemake


def test_probe_and_selection_outputs(smoke_run):
    cfg = yaml.safe_load((smoke_run / "config.yaml").read_text())
    k = cfg["probe"]["k"]
    for task in cfg["tasks"]:
        probe = pl.read_parquet(smoke_run / f"results/probe/tiny/{task}.parquet")
        pool = pl.read_parquet(smoke_run / f"results/data/{task}/pool.parquet")
        assert sorted(probe["id"]) == sorted(pool["id"])
        assert (probe["k"] == k).all()
        assert ((probe["n_correct"] >= 0) & (probe["n_correct"] <= k)).all()
        assert (probe["pass_rate"] == probe["n_correct"] / k).all()
        samples = pl.read_parquet(smoke_run / f"results/probe/tiny/{task}.samples.parquet")
        assert samples.height == pool.height * k
        assert samples.group_by("id").agg(pl.col("correct").sum())["correct"].sum() == probe["n_correct"].sum()
        log = (smoke_run / f"logs/probe/tiny/{task}.log").read_text()
        assert "pass-rate histogram" in log and "[0.8, 1.0]" in log
        for strategy in cfg["selection"]["strategies"]:
            sub = pl.read_parquet(smoke_run / f"results/subsets/tiny/{task}/{strategy}/seed0.parquet")
            assert set(sub["id"]) <= set(pool["id"])
            if strategy in ("hard", "easy", "medium", "random"):
                assert sub.height == int(cfg["selection"]["budget"] * pool.height)


def test_built_model_is_a_real_transformers_model(smoke_run):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = smoke_run / "results/models/tiny"
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    assert model.config.model_type == "qwen3"
    assert tok.decode(tok("Start with 12. Add 3.")["input_ids"]) == "Start with 12. Add 3."


def test_finished_run_has_nothing_to_do(smoke_run):
    res = snakemake(smoke_run, "-n", "--cores", "1")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Nothing to be done" in res.stdout + res.stderr


def test_own_data_is_probed_and_selected_like_any_family(smoke_copy, smoke_config):
    """Family qa: a user's file with its own column names goes through data -> probe -> select (in a copy
    of the smoke run, whose built model it reuses)."""
    from tests.support import ROOT, write_config

    tmp_path = smoke_copy
    own = str(ROOT / "tests/fixtures/hub/own_qa.jsonl")
    fields = {"question": "prompt_text", "answer": "gold", "id": "uid", "tier": "difficulty"}
    cfg = smoke_config
    cfg["datasets"]["own"] = {"family": "qa", "splits": {"pool": {"file": own, "fields": fields, "stop": 6},
                                                         "test": {"file": own, "fields": fields, "start": 6}}}
    cfg["tasks"] = {"own": {"pool": "own/pool", "benchmarks": ["own/test"]}}
    cfg["selection"].update(budget=0.5, strategies=["hard", "easy"])
    write_config(tmp_path, cfg)
    res = snakemake(tmp_path, "--cores", "2", "results/subsets/tiny/own/hard/seed0.parquet",
                    "results/subsets/tiny/own/easy/seed0.parquet", forked=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    probe = pl.read_parquet(tmp_path / "results/probe/tiny/own.parquet")
    assert sorted(probe["id"]) == [f"q-00{i}" for i in range(1, 7)]
    assert set(probe["tier"]) == {"easy", "medium"} and (probe["k"] == cfg["probe"]["k"]).all()
    hard = pl.read_parquet(tmp_path / "results/subsets/tiny/own/hard/seed0.parquet")
    easy = pl.read_parquet(tmp_path / "results/subsets/tiny/own/easy/seed0.parquet")
    assert hard.height == easy.height == 3 and hard["pass_rate"].max() <= easy["pass_rate"].min()
