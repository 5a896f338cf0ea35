"""Models from a GGUF file through Snakemake's own CLI: a source no job could load stops the dry run in one
line, and a GGUF model is converted by one job that every job of the model waits for."""

from __future__ import annotations

import pytest

from tests.support import snakemake, stub_hub_cache, write_config


def gguf_config(tmp_path, smoke_config, **entry) -> None:
    smoke_config["models"] = {"smol": {"chat": True, **entry}}
    write_config(tmp_path, smoke_config)


@pytest.mark.parametrize("entry,message", [
    ({"path": "gguf", "gguf": "models/none.gguf"}, "models.smol.gguf: models/none.gguf: no such file"),
    ({"path": "gguf", "gguf": "package:no_such_models/x.gguf"},
     "models.smol.gguf: package:no_such_models/x.gguf: package 'no_such_models' is not installed"),
    ({"path": "someone/not-cached"}, "models.smol.path: hub model 'someone/not-cached' is not in the cache"),
])
def test_a_model_no_job_could_load_stops_the_dry_run(tmp_path, smoke_config, monkeypatch, entry, message):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache; the tests' Snakemake runs offline
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    gguf_config(tmp_path, smoke_config, **entry)
    res = snakemake(tmp_path, "-n", "--cores", "1")
    assert res.returncode != 0
    lines = [line for line in (res.stdout + res.stderr).splitlines() if "hardex: config error" in line]
    assert len(lines) == 1 and lines[0].startswith(f"hardex: config error: {message}"), lines
    assert "Traceback" not in res.stdout + res.stderr


def test_a_local_model_folder_written_without_dot_slash_is_not_left_to_the_hub(tmp_path, smoke_config):
    """models/smol where ./models is a folder but holds no smol: online, planning used to pass it as a hub id and
    its first job failed hours later ("the hub has no model of that name"). A hub model in the cache passes."""
    (tmp_path / "models").mkdir()
    gguf_config(tmp_path, smoke_config, path="models/smol")
    online = {"HF_HUB_OFFLINE": "0", "HF_HUB_CACHE": str(tmp_path / "hf")}  # an empty cache
    res = snakemake(tmp_path, "-n", "--cores", "1", env=online)
    lines = [line for line in (res.stdout + res.stderr).splitlines() if "hardex: config error" in line]
    assert res.returncode != 0 and lines == [
        f"hardex: config error: models.smol.path: 'models/smol' is no directory in the working directory ({tmp_path}, "
        f"where models/ is one) nor a hub model in the cache; give the model directory's path (./ first is never "
        f"read as a hub id), or for the hub model fill the cache (hf download models/smol)"], res.stderr[-3000:]
    stub_hub_cache(tmp_path / "hf", ["models/smol"])
    res = snakemake(tmp_path, "-n", "--cores", "1", env=online)
    assert "models.smol.path" not in res.stdout + res.stderr


def job_counts(res) -> dict[str, int]:
    """Jobs of the model rules in a dry run's plan."""
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = res.stdout + res.stderr
    return {rule: out.count(f"rule {rule}:") for rule in ("convert_model", "build_model", "probe")}


def test_a_gguf_model_is_converted_once_before_every_job_of_the_model(tmp_path, smoke_config):
    """(What reruns the conversion, a changed file and not a newer copy: tests/workflow/test_inputs_by_content.py.)"""
    pytest.importorskip("gguf", reason="gguf is not installed (README: A real model on this CPU)")
    (tmp_path / "models").mkdir()
    gguf = tmp_path / "models" / "smol.gguf"
    gguf.write_bytes(b"GGUF")  # planning reads no GGUF file as a model: the bytes are never loaded
    gguf_config(tmp_path, smoke_config, path="gguf", gguf="models/smol.gguf")
    probe = "results/probe/smol/swaps.parquet"
    res = snakemake(tmp_path, "-n", "--cores", "1", probe)
    assert job_counts(res) == {"convert_model": 1, "build_model": 0, "probe": 1}
    assert "input: results/data/swaps/pool.parquet, results/overlap/swaps.json, results/models/smol" in res.stdout
