"""Reading raw rows of a split from the hub or a local file in the hub's own schema.

A split's `fields` ({role: the user's column}) renames the user's columns to the ones a family reads,
so every family takes data in other schemas too.

Every error is a DataError that names the file (or hub id), the row and the reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from hardex.tasks.base import DataError, Task, check_split


def read_local(path: str | Path, root: Path | None = None) -> list[dict[str, Any]]:
    """Rows of a local JSON lines, JSON, CSV or Parquet file in the hub's own schema (a CSV's cells as text)."""
    p = resolve(path, root)
    if not p.exists():
        raise DataError(f"{p}: file not found")
    try:
        if p.suffix == ".parquet":
            return pl.read_parquet(p).to_dicts()
        raw = p.read_bytes()
        try:
            # utf-8-sig: a byte-order mark (Excel and Windows editors write one) is not part of the first row
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:  # say where, as a row (JSON lines) and a line: a byte offset helps no one
            line = raw[: e.start].count(b"\n")
            raise DataError(f"{p}: row {line} (line {line + 1}): not UTF-8 text (byte {e.start})") from None
        if p.suffix == ".csv":
            return pl.read_csv(text.encode(), infer_schema=False).to_dicts()
        if p.suffix == ".jsonl" and text.lstrip().startswith("["):
            pass  # a JSON array saved as .jsonl: read as the array it is, below
        elif p.suffix == ".jsonl" or (p.suffix != ".json" and text.lstrip().startswith("{") and "\n{" in text):
            return _json_lines(text, p)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            if e.msg != "Extra data":
                raise
            # one JSON value after another: JSON lines, which datasets' to_json writes whatever the suffix
            return _json_lines(text, p)
        if isinstance(data, dict):  # BIG-Bench's {"examples": [...]}, {"data": [...]}, column-oriented
            for key in ("examples", "data", "rows", "train", "test"):
                if isinstance(data.get(key), list):
                    return data[key]
            if all(isinstance(v, list) for v in data.values()):
                return pl.DataFrame(data).to_dicts()
            return [data]  # JSON lines of one row
        if isinstance(data, list):
            return data
        raise DataError(f"{p}: expected a list of rows")
    except DataError:
        raise
    except Exception as e:  # unreadable file: say which and why, once
        raise DataError(f"{p}: unreadable ({type(e).__name__}: {e})") from None


def _json_lines(text: str, p: Path) -> list[Any]:
    """One JSON value per non-blank line."""
    rows = []
    for i, line in enumerate(text.splitlines()):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise DataError(f"{p}: row {i}: not valid JSON ({e.msg})") from None
    return rows


def load_hub_or_file(spec: dict[str, Any], root: Path | None = None) -> list[dict[str, Any]]:
    """Rows from `spec["file"]` (local, hub schema) or from the hub (`hub`, `config`, `split`)."""
    if spec.get("file"):
        return read_local(spec["file"], root)
    if not spec.get("hub"):
        raise DataError(f"split spec {spec!r} names neither a file nor a hub dataset")
    import datasets

    ds = datasets.load_dataset(spec["hub"], spec.get("config"), split=spec.get("split", "train"))
    return ds.to_list()

def resolve(file: str | Path, root: Path | None) -> Path:
    """A spec's file path, relative paths taken from `root`."""
    p = Path(file)
    return root / p if root is not None and not p.is_absolute() else p


def origin_of(spec: dict[str, Any], root: Path | None = None) -> str:
    """How messages name a split's source: the file path or ``hub:config:split``."""
    if spec.get("file"):
        return str(resolve(spec["file"], root))
    return f"{spec.get('hub')}:{spec.get('config')}:{spec.get('split', 'train')}"


def check_fields(task: Task, fields: dict[str, str] | None) -> dict[str, str]:
    """A split's `fields` ({role: the user's column}), checked against the source columns the family reads."""
    fields = fields or {}
    if fields and not task.columns:
        raise DataError(f"fields: family {task.name!r} generates its rows, so it reads no columns to rename")
    unknown = sorted(set(fields) - set(task.columns))
    if unknown:
        raise DataError(f"fields: unknown role(s) {unknown} for family {task.name!r}; "
                        f"its roles: {', '.join(task.columns)}")
    return fields


class RenamedRow(dict):
    """A raw row after `fields` renamed the user's columns to roles; messages still name the user's columns."""

    def __init__(self, row: dict[str, Any], fields: dict[str, str]):
        # a source column named like a role that fields maps elsewhere is not that role
        super().__init__((k, v) for k, v in row.items() if k not in fields and k not in fields.values())
        self.update((role, row[column]) for role, column in fields.items() if column in row)
        self.fields = fields


def column_name(row: dict[str, Any], key: str) -> str:
    """The user's name of a raw row's column (its name before `fields` renamed it)."""
    return row.fields.get(key, key) if isinstance(row, RenamedRow) else key


def read_rows(spec: dict[str, Any], root: Path | None, task: Task) -> tuple[list[dict[str, Any]], str]:
    """Raw rows and their origin (a file path or ``hub:config:split``); no rows is an error.

    The spec's `fields` renames the user's columns to the columns `task` reads, here and only here.
    """
    fields = check_fields(task, spec.get("fields"))
    origin = origin_of(spec, root)
    rows = load_hub_or_file(spec, root)
    if not rows:
        raise DataError(f"{origin}: no rows")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(f"{origin}: row {i}: expected an object, got {type(row).__name__}")
    return ([RenamedRow(row, fields) for row in rows] if fields else rows), origin


def field(row: dict[str, Any], key: str, origin: str, i: int) -> str:
    """A required non-empty text field of a raw row, or a DataError naming origin, row and column."""
    value = row.get(key)
    if isinstance(value, (list, dict)):
        raise DataError(f"{origin}: row {i}: {column_name(row, key)!r} is a {type(value).__name__}, not one text value")
    if value is None or not str(value).strip():
        raise DataError(f"{origin}: row {i}: no {column_name(row, key)!r}")
    return str(value)


def config_specs(spec: dict[str, Any], configs: list[str]) -> list[dict[str, Any]]:
    """One sub-spec per hub config; a local `file` may hold ``{config}`` to name one file per config."""
    file = spec.get("file")
    if file and len(configs) > 1 and "{config}" not in str(file):
        raise DataError(f"{file}: several configs requested ({', '.join(configs)}) but file has no {{config}}")
    return [{**spec, "config": c, **({"file": str(file).replace("{config}", c)} if file else {})} for c in configs]


def finish(records: list[dict[str, Any]], wheres: list[str], origin: str) -> pl.DataFrame:
    """Build the split: ids unique (a clash names both rows), then base.check_split.

    `wheres[k]` says where record k came from (``"<file>: row 12"``), so errors point at the source.
    """
    seen: dict[str, int] = {}
    for k, rec in enumerate(records):
        if rec["id"] in seen:
            raise DataError(f"{wheres[k]}: duplicate id {rec['id']!r} (first at {wheres[seen[rec['id']]]})")
        seen[rec["id"]] = k
    if not records:
        raise DataError(f"{origin}: no rows")
    return check_split(pl.DataFrame(records, infer_schema_length=None), origin)


def listed(value: list | str | None, kind: type, key: str) -> list | None:
    """A split's `rows` or `ids` list: inline, or a file with one entry per line ('#' starts a comment)."""
    if value is None or isinstance(value, list):
        return value
    path = Path(value)
    if not path.is_file():
        raise DataError(f"{key}: {value!r} is no file (give a list, or a file with one entry per line)")
    entries = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    try:
        return [kind(e) for e in entries if e]
    except ValueError:
        raise DataError(f"{key}: {value}: every line must hold one {kind.__name__}") from None


def keep_listed(df: pl.DataFrame, spec: dict[str, Any]) -> pl.DataFrame:
    """The rows a split spec lists, in the listed order, then its `limit`: `rows` are 0-based positions
    in the split as loaded (a released split given row by row), `ids` are example ids."""
    positions, ids = listed(spec.get("rows"), int, "rows"), listed(spec.get("ids"), str, "ids")
    if positions is not None:
        bad = [r for r in positions if r >= df.height]
        if bad:
            raise DataError(f"rows: {bad[:3]} beyond the {df.height} rows loaded")
        df = df[positions]
    if ids is not None:
        missing = sorted(set(ids) - set(df["id"]))
        if missing:
            raise DataError(f"ids: {len(missing)} not in the split, e.g. {missing[:3]}")
        df = df.join(pl.DataFrame({"id": ids}).with_row_index("_order"), on="id").sort("_order").drop("_order")
    if (positions is not None or ids is not None) and df["id"].is_duplicated().any():
        raise DataError(f"rows/ids: {df.filter(pl.col('id').is_duplicated())['id'][0]!r} is listed twice")
    return df.head(spec["limit"]) if spec.get("limit") else df
