"""The report's first table, the answer a user came for: which strategy gained how much beyond form.

One row per model x task x strategy (control runs are read through their strategy): its gain over the
base model with Table 1's interval, its gain beyond the control that trained and against which it gains
least (each control's learnable % beside), how far it is behind the strategy that gained most (paired by
seed, with an interval and the pairwise table's verdict, Holm-corrected over every pair of strategies), and
a verdict in words. The note opens with one sentence per model x task. "Shown" means a 95 % interval (the
report's level) that excludes zero over several seeds, for a lead after Holm's correction; anything else
is "not shown", never a ranking by point estimates. With one seed the intervals resample test questions
with the trained checkpoints fixed, so a one-seed verdict says so and claims nothing across training runs.
"""

from __future__ import annotations

import polars as pl

from hardex.controls import REGISTRY as CONTROL_REGISTRY
from hardex.selection import CONTROLS, RunName
from hardex.statistics import DIFFERS

# the verdict words the headline and the pairwise table share (pairwise.pair_verdict)
ONE_SEED = "one seed"  # how a verdict from a bootstrap over test questions starts: no claim across training runs

# a control trained when its groups mixed at least this share as often as its strategy's did
TRAINED_SHARE = 0.5

COLUMNS = ["model", "task", "strategy", "n_seeds", "interval", "gain", "gain_ci_low", "gain_ci_high", "learnable_pct",
           "control", "control_learnable_pct", "beyond_form", "beyond_form_ci_low", "beyond_form_ci_high",
           "behind_best", "behind_best_ci_low", "behind_best_ci_high", "behind_best_verdict", "verdict"]
TEXT = ("model", "task", "strategy", "interval", "control", "behind_best_verdict", "verdict")
#: what the headline's Markdown and HTML show, read at a glance (its CSV keeps every column)
COMPACT = ["model", "task", "metric", "strategy", "n_seeds", "gain", "gain_ci_low", "gain_ci_high", "control",
           "beyond_form", "beyond_form_ci_low", "beyond_form_ci_high", "verdict"]


def interval_sign(low: float | None, high: float | None) -> int:
    """+1 / -1 where the interval lies above / below zero, 0 where it reaches zero or is missing."""
    if low is None or high is None or low != low or high != high:
        return 0
    return 1 if low > 0 else -1 if high < 0 else 0


def _pm(value: float, low: float | None, high: float | None) -> str:
    interval = f" [{low:+.1f}, {high:+.1f}]" if low is not None and high is not None else ""
    return f"{value:+.1f}{interval}"


def trained(strategy_pct: float | None, control_pct: float | None) -> bool:
    """Whether a control's groups mixed at least TRAINED_SHARE as often as its strategy's (unknown, where a
    run recorded no steps, counts as trained: nothing says otherwise)."""
    if strategy_pct is None or control_pct is None or strategy_pct != strategy_pct or control_pct != control_pct:
        return True
    return control_pct >= TRAINED_SHARE * strategy_pct


def pick_control(row: dict) -> str | None:
    """The control a Table 1 row is read against: of those that ran, the ones that trained (all, if none
    did), the one against which the gain beyond is smallest (the most conservative), on ties the one of lowest
    `preference` (its record in hardex.controls.REGISTRY: controls.control_preference's order)."""
    ran = [c for c in CONTROLS if row.get(f"beyond_{c}") is not None]
    fair = [c for c in ran if trained(row.get("learnable_pct"), row.get(f"learnable_{c}"))] or ran
    return min(fair, key=lambda c: (row[f"beyond_{c}"], CONTROL_REGISTRY[c].preference), default=None)


def verdict(row: dict) -> str:
    """A row's finding in words, from its intervals; one seed says so."""
    gain = interval_sign(row["gain_ci_low"], row["gain_ci_high"])
    if row["n_seeds"] == 1:
        words = {1: f"{ONE_SEED}: gain over these questions, not across training runs",
                 0: f"{ONE_SEED}: gain not shown",
                 -1: f"{ONE_SEED}: loss over these questions, not across training runs"}[gain]
        return words + (f"; {_untrained(row)}" if gain > 0 and _untrained(row) else "")
    if gain < 0:
        return "loses"
    if gain == 0:
        return "gain not shown"
    if row["control"] is None:
        return "gains; form not separated (no control run)"
    if _untrained(row):
        return f"gains; {_untrained(row)}: beyond form not shown"
    beyond = interval_sign(row["beyond_form_ci_low"], row["beyond_form_ci_high"])
    return {1: "gains beyond form", 0: "gains; beyond form not shown",
            -1: "gains less than its control"}[beyond]


def _untrained(row: dict) -> str:
    """"control did not train (...)" where the row's control's groups mixed far less than its own, else ""."""
    if row["control"] is None or trained(row["learnable_pct"], row["control_learnable_pct"]):
        return ""
    return (f"control did not train ({row['control_learnable_pct']:.0f} % of its groups mixed against "
            f"{row['learnable_pct']:.0f} %)")


def _behind(pairs: dict, best: str, strategy: str) -> dict:
    """best minus strategy from the pairwise table (its row either way round), with the pair's verdict."""
    if strategy == best:
        return {"behind_best": None, "behind_best_ci_low": None, "behind_best_ci_high": None,
                "behind_best_verdict": None, "_pairs": 0}
    r, sign = (pairs[best, strategy], 1) if (best, strategy) in pairs else (pairs.get((strategy, best)), -1)
    if r is None or r["difference"] is None:
        return {"behind_best": None, "behind_best_ci_low": None, "behind_best_ci_high": None,
                "behind_best_verdict": r["verdict"] if r else None, "_pairs": 0}
    low, high = (r["difference_ci_low"], r["difference_ci_high"])[::sign]
    return {"behind_best": sign * r["difference"], "behind_best_ci_low": sign * low, "behind_best_ci_high": sign * high,
            "behind_best_verdict": r["verdict"], "_pairs": r["pairs"]}


def headline_table(gains: pl.DataFrame, pairwise: pl.DataFrame, level: float = 0.95) -> tuple[pl.DataFrame, str]:
    """The headline table and its note, from Table 1 (`gains`, with its beyond_<control> and learnable
    columns) and the pairwise table (`pairwise.pairwise_table`)."""
    pct = f"{round(100 * level)} %"
    pairs = {(r["model"], r["task"], r["strategy"], r["versus"]): r for r in pairwise.iter_rows(named=True)}
    rows, sentences = [], []
    for (model, task), cell in gains.group_by(["model", "task"], maintain_order=True):
        cell = cell.filter(pl.col("strategy").map_elements(lambda s: RunName.parse(s).control is None,
                                                           return_dtype=pl.Boolean))
        if cell.height == 0:
            continue
        best = cell.sort("gain", descending=True, nulls_last=True)["strategy"][0]
        mine = {(a, b): r for (m, t, a, b), r in pairs.items() if (m, t) == (model, task)}
        own = []
        for r in cell.iter_rows(named=True):
            control = pick_control(r)
            row = {**{k: r[k] for k in ("model", "task", "strategy", "n_seeds", "interval", "gain", "gain_ci_low",
                                        "gain_ci_high")},
                   "learnable_pct": r.get("learnable_pct"),
                   "control": str(RunName(r["strategy"], control=control)) if control else None,
                   "control_learnable_pct": r.get(f"learnable_{control}") if control else None,
                   "beyond_form": r.get(f"beyond_{control}") if control else None,
                   "beyond_form_ci_low": r.get(f"beyond_{control}_ci_low") if control else None,
                   "beyond_form_ci_high": r.get(f"beyond_{control}_ci_high") if control else None,
                   **_behind(mine, best, r["strategy"])}
            row["verdict"] = verdict(row)
            own.append(row)
        rows += own
        sentences.append(_sentence(model, task, best, own))
    df = pl.DataFrame([{c: r[c] for c in COLUMNS} for r in rows],
                      schema={c: pl.Utf8 if c in TEXT else pl.Int64 if c == "n_seeds" else pl.Float64 for c in COLUMNS})
    note = (" ".join(sentences) + (" " if sentences else "")
            + f"gain: final minus base accuracy in points on the task's first benchmark, with Table 1's {pct} "
              "interval (interval says which: t over seeds, or a bootstrap over test questions with one seed). "
              "learnable_pct: the share of the run's GRPO groups whose rewards mixed (Table 2). control: of the "
              "strategy's control runs (<strategy>_<control>, Table 1), the one that trained and against which "
              "the gain beyond is smallest (random reward, then format, then shuffled on ties); a control whose "
              f"groups mixed less than {TRAINED_SHARE:g} times as often as its strategy's (control_learnable_pct) did "
              "not train and is read only where no other ran, and then the gain beyond it is not shown. "
              "beyond_form: the gain minus the control's, paired by seed, as in Table 1. The gain's verdict against "
              "the base model and against its control are each their own question: their intervals are "
              "uncorrected, one per comparison. behind_best: the strategy that gained most minus this one, paired "
              "by seed, with its uncorrected interval; behind_best_verdict: that pair's verdict in the pairwise "
              "table, after Holm's correction over every pair of strategies of the model x task (the best is "
              "picked from the same data). A finding is shown where its interval excludes zero over several "
              "seeds, a lead where its pair differs after Holm's correction, and not shown otherwise. With one "
              f"seed ('{ONE_SEED}') an interval resamples the test questions with the trained checkpoint fixed: "
              "it says nothing about training noise, so nothing is shown. The power table says how many seeds a "
              "difference not shown would need.")
    return df, note


def _beyond(row: dict) -> str:
    """A row's gain beyond its control in words ("" without a control)."""
    if not row["control"]:
        return ""
    if _untrained(row):
        finding = f"not shown: {_untrained(row)}"
    elif row["n_seeds"] == 1:
        finding = f"{ONE_SEED}: over these questions only"
    else:
        finding = "shown" if interval_sign(row["beyond_form_ci_low"], row["beyond_form_ci_high"]) > 0 else "not shown"
    return (f", {_pm(row['beyond_form'], row['beyond_form_ci_low'], row['beyond_form_ci_high'])} beyond its "
            f"control {row['control']} ({finding})")


def _sentence(model: str, task: str, best: str, rows: list[dict]) -> str:
    """One model x task in words: the strategy that gained most, its gain beyond form, its lead after Holm's
    correction; then every other strategy that ran with a control, beyond it."""
    top = next(r for r in rows if r["strategy"] == best)
    text = f"{model} on {task}: {best} gained most, {_pm(top['gain'], top['gain_ci_low'], top['gain_ci_high'])} points"
    if interval_sign(top["gain_ci_low"], top["gain_ci_high"]) <= 0:
        text += f" (not shown above zero{', ' + ONE_SEED if top['n_seeds'] == 1 else ''})"
    elif top["n_seeds"] == 1:
        text += f" ({ONE_SEED}: over these questions, not across training runs)"
    text += _beyond(top) or ", with no control run to separate form"
    others = [r for r in rows if r["strategy"] != best and r["behind_best"] is not None]
    if others:
        leads = ", ".join(f"{r['strategy']} by "
                          f"{_pm(r['behind_best'], r['behind_best_ci_low'], r['behind_best_ci_high'])}"
                          for r in others)
        ahead = [r["strategy"] for r in others
                 if (r["behind_best_verdict"] or "").startswith(DIFFERS) and r["behind_best"] > 0]
        n = max(r["_pairs"] for r in others)
        holm = f"after Holm's correction over {n} pair{'s' if n != 1 else ''}"
        if any((r["behind_best_verdict"] or "").endswith(f"({ONE_SEED})") for r in others):
            text += f"; {ONE_SEED}: its lead ({leads}) is over these questions only: which strategy wins is not shown"
        elif len(ahead) == len(others):
            text += f"; its lead over {', '.join(ahead)} is shown {holm} ({leads})"
        else:
            text += (f"; its lead ({leads}), {holm}, is shown over {', '.join(ahead) or 'none'}: which strategy "
                     "wins is not shown")
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
    lines = path.read_text().splitlines()
    end = max((i for i, line in enumerate(lines) if line.startswith("|")), default=len(lines) - 1)
    # the answer and its table: one screen; the full reading and the definitions stay in the file
    return (f"hardex: {path}\n\n" + "\n".join(lines[:end + 1])
            + f"\n\n(the full reading and what each column means: {path})\n")


def answer_lines(headline: pl.DataFrame, metric: str) -> list[str]:
    """The headline's first lines, one per model x task, in plain words: which strategy to train on, or that
    none is shown better (or no gain at all), by how much in `metric` accuracy, beyond which control, over how
    many seeds. From the headline table of that metric (`headline_table`)."""
    lines = []
    for (model, task), cell in headline.group_by(["model", "task"], maintain_order=True):
        rows = list(cell.iter_rows(named=True))
        best = next((r for r in rows if r["behind_best"] is None and r["behind_best_verdict"] is None),
                    max(rows, key=lambda r: r["gain"]))
        n = best["n_seeds"]
        seeds = f"{ONE_SEED}: intervals over these questions only" if n == 1 else f"{n} seeds"
        gain = f"{_pm(best['gain'], best['gain_ci_low'], best['gain_ci_high'])} points"
        beyond = _beyond(best)
        others = [r for r in rows if r is not best]
        behind = [r["strategy"] for r in others
                  if not ((r["behind_best_verdict"] or "").startswith(DIFFERS) and (r["behind_best"] or 0) > 0)]
        shown = n > 1 and interval_sign(best["gain_ci_low"], best["gain_ci_high"]) > 0
        head = f"**{model} on {task}"
        if shown and others and not behind:
            lines.append(f"{head}: train on {best['strategy']}.** It gained {gain} of {metric} accuracy over the base "
                         f"model{beyond}, ahead of every other strategy after Holm's correction ({seeds}).")
        elif shown:
            lead = (f"but its lead over {', '.join(behind)} is not shown after Holm's correction" if others else
                    "the only strategy that ran")
            lines.append(f"{head}: no strategy is shown better than the others** ({seeds}, {metric} accuracy): "
                         f"{best['strategy']} gained most, {gain}{beyond}, {lead}.")
        else:
            lines.append(f"{head}: no gain is shown** ({seeds}, {metric} accuracy): {best['strategy']} gained most, "
                         f"{gain}{beyond}; no lead is read after Holm's correction.")
    return lines
