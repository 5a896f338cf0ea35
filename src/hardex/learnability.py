"""What a pool or a subset gives GRPO to learn from, said where it shows.

GRPO learns only from groups whose rewards differ. An example the base model solved in none or all of
its K probe samples will most likely give agreeing groups: no advantage, loss 0, no gradient. So:

- the probe reports the share of pool examples with 0 < pass rate < 1 and, when that share is near
  zero, what the completions looked like (how many held an answer in the form the task scores, how
  many of those were right, a few of them), since a model that answers in its own words scores 0
  under a scorer that reads a box;
- a subset with no such example is refused before its first GRPO step, unless the config accepts
  the strategy by name (`selection.allow_unlearnable`);
- strategies whose subsets are all drawn from one tie of pass rates (on a pool where most examples
  score 0, `hard` and `medium` are both a random draw among them) are named, in the select job's log
  and in the report.
"""

from __future__ import annotations

import polars as pl

#: below this share of mixed pool examples the probe says that GRPO has little to learn from
NEAR_ZERO_MIXED = 0.05


class UnlearnableSubsetError(RuntimeError):
    """A subset with no example whose GRPO groups can mix rewards; str() says why and what to change."""


def mixed(pass_rates: pl.Series) -> pl.Series:
    """Whether each example's pass rate is strictly between 0 and 1 (its groups can mix rewards)."""
    return (pass_rates > 0) & (pass_rates < 1)


def probe_report(counts: pl.DataFrame, samples: pl.DataFrame, pool: pl.DataFrame, task,
                 near_zero: float = NEAR_ZERO_MIXED, shown: int = 3) -> list[str]:
    """Lines for the probe's log: the share of mixed examples and, when it is near zero, a warning
    with what the completions looked like (answers in the scored form, right ones, a few examples)."""
    is_mixed = mixed(counts["pass_rate"])
    share = float(is_mixed.mean())
    lines = [f"learnable: {is_mixed.sum()} of {counts.height} pool examples "
             f"({100 * share:.1f} %) have 0 < pass rate < 1; only their GRPO groups can mix rewards"]
    if share >= near_zero:
        return lines
    answers = dict(zip(pool["id"], pool["answer"]))
    found = [bool(task.answer(c, answers[i])) for i, c in zip(samples["id"], samples["completion"])]
    n = samples.height
    lines += [
        f"WARNING: {100 * share:.1f} % of the pool is learnable (pass rate 0: "
        f"{int((counts['pass_rate'] == 0).sum())}, pass rate 1: {int((counts['pass_rate'] == 1).sum())}): "
        f"GRPO on it will mostly train at loss 0.",
        f"  completions with an answer in the form this task scores (scoring {task.scoring!r}): "
        f"{sum(found)} of {n}; right: {int(samples['correct'].sum())} of {n}",
    ]
    if sum(found) < 0.2 * n and task.scoring == "lenient":
        lines.append("  most completions give no answer in that form: if the model states answers in its own "
                     "words, tasks.<task>.scoring: flexible also reads the last number or option")
    lines += [f"  e.g. {c[:160]!r}" for c in samples["completion"].head(shown)]
    return lines


def check_learnable(subset: pl.DataFrame, strategy: str, allowed: bool) -> str:
    """A line on the subset's learnable examples; an UnlearnableSubsetError before any GRPO step when
    it has none and the config does not accept that by name."""
    n_mixed = int(mixed(subset["pass_rate"]).sum())
    line = f"{n_mixed} of {subset.height} examples have 0 < pass rate < 1"
    if n_mixed or allowed:
        return line + ("" if n_mixed else f": none, accepted by selection.allow_unlearnable ({strategy})")
    rates = ", ".join(f"{r:g}" for r in sorted(set(subset["pass_rate"].to_list())))
    raise UnlearnableSubsetError(
        f"subset {strategy!r} has no learnable example: every pass rate is in {{{rates}}}, so every GRPO "
        f"group would most likely agree (no advantage, loss 0, no gradient). Pick another strategy or pool, "
        f"probe with a larger probe.k, or accept it by name: selection.allow_unlearnable: [{strategy}]")


def tie(subset: pl.DataFrame, probe: pl.DataFrame) -> tuple[float, int] | None:
    """(pass rate, pool examples at it) when a whole subset is drawn from one tie of pass rates that
    holds more pool examples than the subset took, else None: the ranking chose nothing but the tie."""
    rates = subset["pass_rate"].unique()
    if subset.height == 0 or rates.len() != 1:
        return None
    at = int((probe["pass_rate"] == rates[0]).sum())
    return (float(rates[0]), at) if at > subset.height else None


def tie_line(strategy: str, subset: pl.DataFrame, probe: pl.DataFrame) -> str | None:
    """The select job's line for a subset that is a random draw from one tie (see `tie`), or None."""
    found = tie(subset, probe)
    if found is None:
        return None
    rate, at = found
    return (f"{strategy}: all {subset.height} examples tie at pass rate {rate:g} with {at - subset.height} more in "
            f"the pool: the subset is a seeded random draw among those {at}; any other strategy landing in the "
            f"same tie trains on the same kind of examples")
