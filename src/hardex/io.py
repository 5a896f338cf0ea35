"""File helpers shared by every stage: reading result files (naming a damaged one), atomic writes (no
stage leaves a half-written file that a later stage could read as complete), the settings hash that
keys resumable work, and the checkpoints a training run has saved."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import polars as pl


class DamagedFileError(OSError):
    """A result file that exists but cannot be read (cut short by a full disk or a killed copy)."""


@contextmanager
def _naming_damage(path: str | Path):
    """Turn polars' error on a damaged Parquet file into one naming the file (polars' own does not) and
    saying how to get it back: Snakemake remakes a deleted output on the next run."""
    try:
        yield
    except (pl.exceptions.ComputeError, OSError) as e:
        raise DamagedFileError(f"{path}: damaged or incomplete ({str(e).splitlines()[0]}); delete it and run "
                               f"snakemake again to remake it") from None


def read_parquet(path: str | Path, **kwargs) -> pl.DataFrame:
    """pl.read_parquet, naming the file when it is damaged."""
    with _naming_damage(path):
        return pl.read_parquet(path, **kwargs)


def parquet_columns(path: str | Path) -> list[str]:
    """The column names of a Parquet file, naming the file when it is damaged."""
    with _naming_damage(path):
        return list(pl.read_parquet_schema(path))


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` to write to; moved onto `path` only when the block succeeds. Its
    name does not end like the file's, so a glob for finished files (`*.parquet`) never matches it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_parquet_atomic(df: pl.DataFrame, path: str | Path, metadata: dict[str, Any] | None = None) -> None:
    """Write a table atomically; `metadata` ({key: JSON-able value}) goes into the Parquet file's key-value
    metadata, read back by `read_parquet_metadata`."""
    meta = {k: json.dumps(v, sort_keys=True, default=str) for k, v in (metadata or {}).items()} or None
    with atomic_path(path) as tmp:
        df.write_parquet(tmp, metadata=meta)


def read_parquet_metadata(path: str | Path, key: str) -> Any | None:
    """The value `write_parquet_atomic` stored under `key` in a Parquet file, or None (a file written
    without it, e.g. before it was recorded); names the file when it is damaged."""
    with _naming_damage(path):
        found = pl.read_parquet_metadata(path).get(key)
    return None if found is None else json.loads(found)


def write_text_atomic(text: str, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json_atomic(obj: Any, path: str | Path) -> None:
    write_text_atomic(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)


def settings_hash(settings: dict[str, Any]) -> str:
    """A short hash of settings (JSON, keys sorted): names resumable work done with exactly them."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes: what identifies an input that lives outside the results (a GGUF file in
    an installed package, a local data file), so that a copy or a reinstall, newer but the same, reruns nothing.
    Kept per process by the file's size and modification time: planning asks for it once per job."""
    st = os.stat(path)
    return _file_sha256(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def checkpoint_steps(ckpt_dir: Path) -> list[int]:
    """Steps of the complete checkpoints in a folder (checkpoint-N with a trainer_state.json)."""
    if not ckpt_dir.exists():
        return []
    steps = []
    for p in ckpt_dir.iterdir():
        m = re.fullmatch(r"checkpoint-(\d+)", p.name)
        if m and (p / "trainer_state.json").exists():
            steps.append(int(m.group(1)))
    return sorted(steps)
