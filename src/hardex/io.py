"""File helpers shared by every stage: atomic writes, so that no stage leaves a half-written file
that a later stage could read as complete."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def write_parquet_atomic(df: pl.DataFrame, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    df.write_parquet(tmp)
    os.replace(tmp, path)


def write_json_atomic(obj: Any, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
