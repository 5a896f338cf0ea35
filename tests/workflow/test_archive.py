"""A finished study packed into one archive and unpacked into a fresh folder (hardex-archive, docs/archive.md):
Snakemake treats the archived outputs as done, builds the report without training, and plans only a new
seed's runs; an archive of other settings is refused with nothing written."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import tarfile

from tests.support import ROOT, snakemake, with_key, write_config
from tests.workflow.test_staleness import planned

EVAL = "results/eval/tiny/swaps/hard/seed0.parquet"


def archive_cli(*args, cwd=None):
    """The hardex-archive command (python -m hardex.archive: its console script's main)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "hardex.archive", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=900)


def job_counts(stderr: str) -> dict[str, int]:
    """The rules Snakemake ran and how often, from the 'Job stats' table it prints (rule all left out)."""
    table = stderr.split("Job stats:", 1)[1] if "Job stats:" in stderr else ""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)
            if m.group(1) not in ("all", "total")}


def test_an_archive_holds_the_small_results_their_records_and_a_manifest_and_refuses_other_settings(
        smoke_run, smoke_config, tmp_path):
    archive = tmp_path / "study.tar.gz"
    res = archive_cli("pack", archive, "--directory", smoke_run)
    assert res.returncode == 0, res.stderr
    names = tarfile.open(archive).getnames()
    assert names[0] == "manifest.json"
    assert not [n for n in names if n.startswith("results/models/") or "/checkpoints/" in n or ".chunks/" in n]
    assert "results/train/tiny/swaps/hard/seed0/final/ARCHIVED_WITHOUT_ADAPTERS" in names
    assert not [n for n in names if "/final/" in n and not n.endswith("ARCHIVED_WITHOUT_ADAPTERS")]

    manifest = json.loads(archive_cli("show", archive).stdout)
    git = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True).stdout
    assert manifest["code_version"] == git.strip()
    assert manifest["config"]["grpo"]["learning_rate"] == 1e-4
    assert len(manifest["runs"]) == 6 and all(r["complete"] for r in manifest["runs"])
    # every output travels with Snakemake's record of it, named as its file persistence names it
    for out in manifest["outputs"]:
        record = ".snakemake/metadata/" + base64.urlsafe_b64encode(out.encode()).decode()
        assert record in names, out
    assert {e["path"] for e in manifest["files"]} == set(names) - {"manifest.json"}

    # settings the archived results depend on: refused, one line per difference, nothing written
    other = tmp_path / "other"
    other.mkdir()
    write_config(other, with_key(with_key(smoke_config, "grpo.learning_rate", 3e-4), "seeds", [0, 1]))
    res = archive_cli("unpack", archive, "--directory", other)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [  # more seeds are not a difference
        "hardex-archive: refused: grpo.learning_rate: archive 0.0001, config 0.0003"]
    assert sorted(p.name for p in other.iterdir()) == ["config.yaml"]

    # another study's data split already there
    write_config(other, smoke_config)
    (other / "results/data/swaps").mkdir(parents=True)
    (other / "results/data/swaps/pool.parquet").write_bytes(b"other data")
    res = archive_cli("unpack", archive, "--directory", other)
    assert res.returncode == 1 and "refused: results/data/swaps/pool.parquet: differs from the archive's" in res.stderr
    assert sorted(p.name for p in other.iterdir()) == ["config.yaml", "results"]
    assert [p.name for p in (other / "results").iterdir()] == ["data"]


def test_unpacked_results_are_done_for_snakemake_the_report_builds_and_a_new_seed_adds_only_its_runs(
        smoke_run, smoke_config, tmp_path):
    archive = tmp_path / "study.tar.gz"
    assert archive_cli("pack", archive, "--directory", smoke_run).returncode == 0
    outputs = json.loads(archive_cli("show", archive).stdout)["outputs"]
    target = tmp_path / "target"
    target.mkdir()
    write_config(target, smoke_config)
    res = archive_cli("unpack", archive, "--directory", target, "--cores", "2")
    assert res.returncode == 0, res.stderr
    assert not (target / "results/train/tiny/swaps/hard/seed0/checkpoints").exists()

    # nothing to do for the archived outputs: the model was made again before they were marked done
    assert planned(target, *outputs) == set()
    # the report is all that remains, and it builds without a model job
    res = snakemake(target, "--cores", "2", forked=True)
    assert res.returncode == 0, res.stderr[-3000:]
    ran = job_counts(res.stderr)
    assert ran and all(rule.startswith("report") for rule in ran), ran
    assert (target / "results/tables/headline.md").exists()

    # one more seed: its own subsets, runs and evaluations; the base is evaluated again (once per run seed,
    # Snakemake's params trigger reading the archived record), the probe reused
    write_config(target, with_key(smoke_config, "seeds", [0, 1]))
    jobs = {j for j in planned(target) if not j.startswith("report")}
    assert jobs == {j for j in jobs if "seed=1" in j} | {"evaluate_base[model=tiny, task=swaps]"}
    assert {j.split("[")[0] for j in jobs} == {"select", "train", "evaluate_run", "evaluate_base"}
    assert sum(j.startswith("train[") for j in jobs) == 6

    # evaluating a run again needs its weights, which this archive left out: the job says so
    write_config(target, with_key(smoke_config, "evaluation.seed", 7))
    res = snakemake(target, "--cores", "1", EVAL, forked=True)
    assert res.returncode != 0
    assert ("results/train/tiny/swaps/hard/seed0 was unpacked from an archive without its adapters: retrain it "
            "(snakemake -R results/train/tiny/swaps/hard/seed0/steps.parquet) or unpack an archive made with "
            "--adapters") in (target / "logs/eval/tiny/swaps/hard/seed0.log").read_text()


def test_settings_the_results_do_not_depend_on_may_differ_and_strategies_may_be_added(smoke_config):
    from hardex.archive import config_differences
    from hardex.config import check_config

    def differences(key, value):
        return config_differences(check_config(with_key(smoke_config, "seeds", [0])),
                                  check_config(with_key(smoke_config, key, value)))

    assert differences("seeds", [0, 1, 2]) == []
    assert differences("compute", {"threads": 8}) == []
    assert differences("report", {"bootstrap": {"iterations": 100}}) == []
    assert differences("selection.strategies", ["hard", "easy", "random", "full"]) == []
    controls = {"random_reward": ["hard"], "format": ["hard"], "shuffled": ["hard"]}
    assert differences("selection.controls", controls) == []
    assert differences("selection.strategies", ["hard", "easy"]) == [
        'selection.strategies: archive ["hard", "easy", "random"], config ["hard", "easy"]']
    assert differences("selection.budget", 0.2) == ["selection.budget: archive 0.1, config 0.2"]
    assert differences("models.tiny.build.arch.hidden_size", 64) == [
        "models.tiny.build.arch.hidden_size: archive 32, config 64"]


def test_a_run_trained_but_not_evaluated_travels_only_with_its_weights(smoke_config, tmp_path):
    """A study packed between a run's training and its evaluation: without --adapters the run's training is
    left out (unpacked without weights, its evaluation could not run: the sequential study's seventh sitting
    stopped on one), so that it trains again; with --adapters it travels whole."""
    from hardex import layout
    from hardex.archive import study_files
    from hardex.config import check_config

    cfg = check_config(with_key(smoke_config, "seeds", [0]))
    for strategy in ("hard", "easy"):
        fields = {"model": "tiny", "task": "swaps", "strategy": strategy, "seed": 0}
        (tmp_path / layout.fill(layout.FINAL, **fields)).mkdir(parents=True)
        (tmp_path / layout.fill(layout.FINAL, **fields) / "adapter_model.safetensors").write_bytes(b"weights")
        (tmp_path / layout.fill(layout.STEPS, **fields)).write_bytes(b"steps")
    evaluated = tmp_path / layout.fill(layout.EVAL_RUN, model="tiny", task="swaps", strategy="hard", seed=0)
    evaluated.parent.mkdir(parents=True)
    evaluated.write_bytes(b"evaluation")

    files, outputs, _, unevaluated = study_files(tmp_path, cfg, adapters=False)
    assert unevaluated == ["results/train/tiny/swaps/easy/seed0"]
    assert not [f for f in [*files, *outputs] if "/easy/" in f]
    assert "results/train/tiny/swaps/hard/seed0/steps.parquet" in files
    files, outputs, _, unevaluated = study_files(tmp_path, cfg, adapters=True)
    assert unevaluated == []
    assert {"results/train/tiny/swaps/easy/seed0/steps.parquet",
            "results/train/tiny/swaps/easy/seed0/final/adapter_model.safetensors"} <= set(files)
