"""Pass rates computed elsewhere (a verl run, a published per-example file), imported as the probe table.

`tasks.<task>.probe.from` names a CSV, JSON lines or Parquet file with one row per pool example: `id`,
`samples` (how many completions were scored) and `successes` (how many were right); optionally
`greedy_correct` (the base model's greedy answer right: what base_wrong, base_right and matched_random split
on) and `source` (free text: where each row came from). Other columns are ignored.

The file is checked (`read_rates`: columns, whole numbers, 0 <= successes <= samples, one row per id) and
matched to the pool (`check_ids`: every pool id once, no other id), at planning where the pool's ids are
known then (hardex.config_data) and in the job either way, and becomes the table hardex's own probe writes
(`probe_table`): k = samples, n_correct = successes, pass_rate = successes / samples, the pool's tier;
greedy_correct null where the file has none, tokens null (the file does not say what the samples cost).
Where the rates came from (the file, its sha256, `tasks.<task>.probe.from_note`, the `source` values) goes
into the table's provenance (`imported_provenance`), in place of the model and sampling hardex's probe
records, which are unknown here.

Imports only hardex.io: the config check reads files with it at planning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import polars as pl

from hardex.io import file_sha256

#: the columns a pass-rate file must have
RATE_COLUMNS = ("id", "samples", "successes")
#: the optional ones: the base model's greedy answer right (base_wrong / base_right need it), free-text origin
GREEDY_COLUMN, SOURCE_COLUMN = "greedy_correct", "source"
#: what a pass-rate file may be, by its name's ending
READERS = {".csv": "CSV", ".jsonl": "JSON lines", ".parquet": "Parquet"}
#: ids a refusal names at most
SHOWN = 3


class ImportedRatesError(ValueError):
    """A pass-rate file that cannot stand for the pool's probe; str() is one line naming the config key."""


def _some(ids: Iterable[Any]) -> str:
    ids = list(ids)
    return ", ".join(map(str, ids[:SHOWN])) + (", ..." if len(ids) > SHOWN else "")


def _read(path: Path, key: str) -> pl.DataFrame:
    kind = READERS.get(path.suffix.lower())
    if kind is None:
        kinds = ", ".join(f"{v} ({k})" for k, v in READERS.items())
        raise ImportedRatesError(f"{key}: {path}: a pass-rate file is {kinds}, by its name's ending")
    if not path.is_file():
        raise ImportedRatesError(f"{key}: {path} does not exist (a path relative to the working directory)")
    try:
        if kind == "CSV":  # ids as written: 007 stays 007
            return pl.read_csv(path, schema_overrides={"id": pl.Utf8}, infer_schema_length=None)
        if kind == "JSON lines":
            return pl.read_ndjson(path, infer_schema_length=None)
        return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError, ValueError) as e:
        raise ImportedRatesError(f"{key}: {path} cannot be read as {kind} ({str(e).splitlines()[0]})") from None


def _whole_numbers(df: pl.DataFrame, column: str, path: Path, key: str) -> pl.Series:
    """The column as Int64, or a refusal naming the rows that are not whole numbers."""
    values = df[column]
    if values.dtype == pl.Utf8 or not values.dtype.is_numeric():
        raise ImportedRatesError(f"{key}: {path}: column {column!r} holds {values.dtype}, not counts")
    floats = values.cast(pl.Float64)
    bad = df.filter(floats.is_null() | floats.is_nan() | (floats != floats.round(0)))
    if bad.height:
        raise ImportedRatesError(f"{key}: {path}: {bad.height} rows have a {column} that is not a whole number "
                                 f"(ids {_some(bad['id'])})")
    return floats.cast(pl.Int64)


def _greedy(df: pl.DataFrame, path: Path, key: str) -> pl.Series:
    """greedy_correct as Boolean: true/false or 1/0 for every row."""
    values = df[GREEDY_COLUMN]
    if values.dtype != pl.Boolean:
        ok = values.dtype.is_numeric() and values.cast(pl.Float64).is_in([0.0, 1.0]).fill_null(False).all()
        if not ok:
            raise ImportedRatesError(f"{key}: {path}: column {GREEDY_COLUMN!r} must be true/false or 1/0 "
                                     f"(it holds {values.dtype})")
        values = values.cast(pl.Float64) == 1.0
    if values.null_count():
        missing = df.filter(values.is_null())["id"]
        raise ImportedRatesError(f"{key}: {path}: {missing.len()} rows have no {GREEDY_COLUMN} (ids {_some(missing)}); "
                                 f"give every row's or drop the column")
    return values.alias(GREEDY_COLUMN)


def read_rates(path: str | Path, key: str) -> pl.DataFrame:
    """The file's rows as id (text), samples, successes (Int64), with greedy_correct (Boolean) and source
    (text) where the file has them; an ImportedRatesError naming `key`, the counts and the first ids
    otherwise: a column missing, an id missing or given twice, a count that is not a whole number,
    samples below 1, successes below 0 or above samples."""
    path = Path(path).expanduser()
    df = _read(path, key)
    missing = [c for c in RATE_COLUMNS if c not in df.columns]
    if missing:
        raise ImportedRatesError(f"{key}: {path}: no column {', '.join(map(repr, missing))} (it has "
                                 f"{', '.join(df.columns) or 'none'}); a pass-rate file has {', '.join(RATE_COLUMNS)} "
                                 f"(and optionally {GREEDY_COLUMN}, {SOURCE_COLUMN})")
    if df.height == 0:
        raise ImportedRatesError(f"{key}: {path} holds no rows")
    df = df.with_columns(pl.col("id").cast(pl.Utf8))
    if df["id"].null_count():
        raise ImportedRatesError(f"{key}: {path}: {df['id'].null_count()} rows have no id")
    twice = df.filter(pl.col("id").is_duplicated())["id"].unique(maintain_order=True)
    if twice.len():
        raise ImportedRatesError(f"{key}: {path}: {twice.len()} ids are given more than once ({_some(twice)})")
    out = df.select("id").with_columns(_whole_numbers(df, "samples", path, key).alias("samples"),
                                       _whole_numbers(df, "successes", path, key).alias("successes"))
    problems = [(pl.col("samples") < 1, "samples below 1"), (pl.col("successes") < 0, "successes below 0"),
                (pl.col("successes") > pl.col("samples"), "successes above samples")]
    for condition, what in problems:
        bad = out.filter(condition)["id"]
        if bad.len():
            raise ImportedRatesError(f"{key}: {path}: {bad.len()} of {out.height} rows have {what} (ids {_some(bad)})")
    if GREEDY_COLUMN in df.columns:
        out = out.with_columns(_greedy(df, path, key))
    if SOURCE_COLUMN in df.columns:
        out = out.with_columns(df[SOURCE_COLUMN].cast(pl.Utf8).alias(SOURCE_COLUMN))
    return out


def check_ids(rates: pl.DataFrame, pool_ids: Iterable[str], key: str) -> None:
    """Every pool id in the file and no other: an ImportedRatesError naming both counts and the first ids."""
    pool_ids = [str(i) for i in pool_ids]
    pool, given = set(pool_ids), set(rates["id"])
    absent = [i for i in pool_ids if i not in given]
    extra = [i for i in rates["id"] if i not in pool]
    if not absent and not extra:
        return
    parts = []
    if absent:
        parts.append(f"{len(absent)} of the pool's {len(pool_ids)} ids are not in the file ({_some(absent)})")
    if extra:
        parts.append(f"{len(extra)} of the file's {rates.height} ids are not in the pool ({_some(extra)})")
    raise ImportedRatesError(f"{key}: the pass rates do not match the pool: " + "; ".join(parts))


def probe_table(rates: pl.DataFrame, pool: pl.DataFrame, key: str) -> pl.DataFrame:
    """The probe table (before its posterior columns, `hardex.posterior.with_posterior`) from checked rates,
    in the pool's order: id, k, n_correct, pass_rate, greedy_correct (null where the file has none), tier
    (the pool's), tokens (null: unknown)."""
    check_ids(rates, pool["id"], key)
    tier = (pool["tier"] if "tier" in pool.columns else pl.Series([None] * pool.height)).cast(pl.Utf8)
    greedy = rates[GREEDY_COLUMN] if GREEDY_COLUMN in rates.columns else pl.Series([None] * rates.height,
                                                                                    dtype=pl.Boolean)
    table = rates.select("id", pl.col("samples").alias("k"), pl.col("successes").alias("n_correct"),
                         (pl.col("successes") / pl.col("samples")).alias("pass_rate"),
                         greedy.alias("greedy_correct"))
    order = pool.select(pl.col("id").cast(pl.Utf8), tier.alias("tier"))
    return order.join(table, on="id", how="left", maintain_order="left").select(
        "id", "k", "n_correct", "pass_rate", "greedy_correct", "tier", pl.lit(None, dtype=pl.Int64).alias("tokens"))


def imported_provenance(path: str | Path, note: str | None, rates: pl.DataFrame,
                        prior: dict[str, Any]) -> dict[str, Any]:
    """The probe table's provenance (`hardex.probing.PROVENANCE_KEY`) for imported rates: the keys hardex's
    probe records, None where the file cannot say (the model's fingerprint, the sampling), k where every
    example has the same number of samples, and `imported`: the file, its sha256, the config's note and the
    `source` values (the first few)."""
    ks = rates["samples"].unique()
    sources = (rates[SOURCE_COLUMN].drop_nulls().unique(maintain_order=True).to_list()
               if SOURCE_COLUMN in rates.columns else [])
    return {"model_fingerprint": None, "dtype": None, "backend": None, "scorer": None,
            "k": int(ks[0]) if ks.len() == 1 else None, "temperature": None, "top_p": None, "max_new_tokens": None,
            "seed": None, "adaptive": False, "prior": prior,
            "imported": {"file": str(path), "sha256": file_sha256(path), "note": note,
                         "sources": sources[:10], "greedy": GREEDY_COLUMN in rates.columns}}
