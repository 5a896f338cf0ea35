"""The report's first table, the answer a user came for: which strategy gained how much beyond form.

One row per model x task x strategy (control runs are read through their strategy): its gain over the
base model with Table 1's interval, its gain beyond its form control, how far it is behind the strategy
that gained most (paired by seed, with an interval), and a verdict in words. The note opens with one
sentence per model x task. "Shown" means a 95 % interval (the report's level) that excludes zero;
anything else is "not shown", never a ranking by point estimates.
"""

from __future__ import annotations

from typing import Callable

import polars as pl

from hardex.selection import control_run, run_strategy_parts

# (model, task, a, b) -> run strategy a's gain minus b's, paired by seed, with its interval (or Nones):
# tables.run_difference over the report's results
Difference = Callable[[str, str, str, str], tuple]

# the control that reads "form": rewarded for any readable answer; else one rewarded against another
# example's answer (form and sampling alone)
FORM_CONTROLS = ("format", "shuffled")

COLUMNS = ["model", "task", "strategy", "n_seeds", "interval", "gain", "gain_ci_low", "gain_ci_high", "control",
           "beyond_form", "beyond_form_ci_low", "beyond_form_ci_high", "behind_best", "behind_best_ci_low",
           "behind_best_ci_high", "verdict"]


def _sign(low: float | None, high: float | None) -> int:
    """+1 / -1 where the interval lies above / below zero, 0 where it reaches zero or is missing."""
    if low is None or high is None or low != low or high != high:
        return 0
    return 1 if low > 0 else -1 if high < 0 else 0


def _pm(value: float, low: float | None, high: float | None) -> str:
    interval = f" [{low:+.1f}, {high:+.1f}]" if low is not None and high is not None else ""
    return f"{value:+.1f}{interval}"


def verdict(row: dict) -> str:
    """A row's finding in words, from its intervals."""
    gain = _sign(row["gain_ci_low"], row["gain_ci_high"])
    if gain < 0:
        return "loses"
    if gain == 0:
        return "gain not shown"
    if row["control"] is None:
        return "gains; form not separated (no control run)"
    beyond = _sign(row["beyond_form_ci_low"], row["beyond_form_ci_high"])
    return {1: "gains beyond form", 0: "gains; beyond form not shown",
            -1: "gains less than its control"}[beyond]


def headline_table(gains: pl.DataFrame, difference: Difference, level: float = 0.95) -> tuple[pl.DataFrame, str]:
    """The headline table and its note, from Table 1 (`gains`, with its beyond_<control> columns) and the
    paired difference between two strategies' runs (`difference`)."""
    pct = f"{round(100 * level)} %"
    rows, sentences = [], []
    for (model, task), cell in gains.group_by(["model", "task"], maintain_order=True):
        cell = cell.filter(pl.col("strategy").map_elements(lambda s: run_strategy_parts(s)[2] is None,
                                                           return_dtype=pl.Boolean))
        if cell.height == 0:
            continue
        best = cell.sort("gain", descending=True, nulls_last=True)["strategy"][0]
        own = []
        for r in cell.iter_rows(named=True):
            control = next((c for c in FORM_CONTROLS if r.get(f"beyond_{c}") is not None), None)
            behind = (None,) * 3 if r["strategy"] == best else difference(model, task, best, r["strategy"])
            row = {**{k: r[k] for k in ("model", "task", "strategy", "n_seeds", "interval", "gain", "gain_ci_low", "gain_ci_high")},
                   "control": control_run(r["strategy"], control) if control else None,
                   "beyond_form": r.get(f"beyond_{control}") if control else None,
                   "beyond_form_ci_low": r.get(f"beyond_{control}_ci_low") if control else None,
                   "beyond_form_ci_high": r.get(f"beyond_{control}_ci_high") if control else None,
                   "behind_best": behind[0], "behind_best_ci_low": behind[1], "behind_best_ci_high": behind[2]}
            row["verdict"] = verdict(row)
            own.append(row)
        rows += own
        sentences.append(_sentence(model, task, best, own))
    df = pl.DataFrame(rows, schema={c: (pl.Utf8 if c in ("model", "task", "strategy", "interval", "control", "verdict")
                                        else pl.Int64 if c == "n_seeds" else pl.Float64) for c in COLUMNS})
    note = (" ".join(sentences) + (" " if sentences else "")
            + f"gain: final minus base accuracy in points on the task's first benchmark, with Table 1's {pct} "
              "interval (interval says which: t over seeds, or a bootstrap over test questions with one seed). "
              "beyond_form: the gain minus that of the strategy's control run (control: <strategy>_format, "
              "rewarded for any answer the scorer reads, else <strategy>_shuffled, rewarded against another "
              "example's answer), paired by seed, as in Table 1; empty where no control ran. behind_best: the "
              "strategy that gained most minus this one, paired by seed, with its interval. A finding is shown "
              "where its interval excludes zero and not shown otherwise; the power table says how many seeds "
              "a difference not shown would need.")
    return df, note


def _beyond(row: dict) -> str:
    """A row's gain beyond its control in words ("" without a control)."""
    if not row["control"]:
        return ""
    shown = _sign(row["beyond_form_ci_low"], row["beyond_form_ci_high"]) > 0
    return (f", {_pm(row['beyond_form'], row['beyond_form_ci_low'], row['beyond_form_ci_high'])} beyond its "
            f"control {row['control']} ({'shown' if shown else 'not shown'})")


def _sentence(model: str, task: str, best: str, rows: list[dict]) -> str:
    """One model x task in words: the strategy that gained most, its gain beyond form, its lead; then every
    other strategy that ran with a control, beyond it."""
    top = next(r for r in rows if r["strategy"] == best)
    text = f"{model} on {task}: {best} gained most, {_pm(top['gain'], top['gain_ci_low'], top['gain_ci_high'])} points"
    if _sign(top["gain_ci_low"], top["gain_ci_high"]) <= 0:
        text += " (not shown above zero)"
    text += _beyond(top) or ", with no control run to separate form"
    others = [r for r in rows if r["strategy"] != best and r["behind_best"] is not None]
    if others:
        ahead = [r for r in others if _sign(r["behind_best_ci_low"], r["behind_best_ci_high"]) > 0]
        leads = ", ".join(f"{r['strategy']} by {_pm(r['behind_best'], r['behind_best_ci_low'], r['behind_best_ci_high'])}"
                          for r in others)
        if len(ahead) == len(others):
            text += f"; it beats every other strategy ({leads}): shown"
        else:
            text += (f"; its lead ({leads}) is shown over {', '.join(r['strategy'] for r in ahead) or 'none'}: "
                     "which strategy wins is not shown")
    text += "."
    for r in rows:
        if r["strategy"] != best and r["control"]:
            text += f" {r['strategy']} gained {_pm(r['gain'], r['gain_ci_low'], r['gain_ci_high'])}{_beyond(r)}."
    return text


def fresh_headline(path, since: float) -> str | None:
    """The headline table's Markdown where a run rebuilt it after `since` (a timestamp), for the workflow
    to print when it ends; None where it was not rebuilt (a run that stopped short of the report)."""
    from pathlib import Path

    path = Path(path)
    if not path.is_file() or path.stat().st_mtime < since:
        return None
    return f"hardex: {path}\n\n{path.read_text()}"
