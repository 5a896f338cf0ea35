"""What a pool or a subset gives GRPO to learn from, said where it shows.

GRPO learns only from groups whose rewards differ. An example the base model solved in none or all of
its K probe samples will most likely give agreeing groups: no advantage, loss 0, no gradient. So:

- the probe reports the share of pool examples with 0 < pass rate < 1 and, when that share is near
  zero, what the completions looked like (how many held an answer in the form the task scores, how
  many of those were right, a few of them), since a model that answers in its own words scores 0
  under a scorer that reads a box;
- a subset whose GRPO groups are expected to mix less than `MIN_EXPECTED_MIXED` of the time is refused
  before its first GRPO step, unless the config accepts the strategy by name
  (`selection.allow_unlearnable`). The expectation is each example's Beta posterior given its k of K
  (`hardex.posterior`, prior fitted to the pool) at GRPO's group size G, not the raw count: 0 of 8 on a
  pool the model sometimes solves is not "never";
- a probe that sampled at another temperature or length than GRPO does is said to (`sampling_mismatch`):
  its pass rates, and what is expected from them, are the probe's decoding, not GRPO's;
- strategies whose subsets are all drawn from one tie of pass rates (on a pool where most examples
  score 0, `hard` and `medium` are both a random draw among them) are named, in the select job's log
  and in the report.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from hardex.posterior import POSTERIOR_COLUMNS, mixed_share, with_posterior

#: below this expected share of mixed GRPO groups (posterior, at the run's G) a subset is refused; 5 %: fewer
#: than one group in twenty would have a gradient
MIN_EXPECTED_MIXED = 0.05

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


def with_probe_posterior(subset: pl.DataFrame, probe: pl.DataFrame) -> pl.DataFrame:
    """The subset with its examples' k, n_correct and posterior columns from the pool's probe table (fitted
    here when the table predates them: the prior needs the whole pool, not the subset)."""
    if not set(POSTERIOR_COLUMNS) <= set(probe.columns):
        probe = with_posterior(probe)[0]
    cols = ["id", *(c for c in ("k", "n_correct", *POSTERIOR_COLUMNS) if c not in subset.columns)]
    return subset.join(probe.select(cols), on="id", how="left", maintain_order="left")


def check_learnable(subset: pl.DataFrame, strategy: str, allowed: bool, group_size: int | None = None) -> str:
    """A line on what the subset gives GRPO to learn; an UnlearnableSubsetError before any GRPO step when
    it gives too little and the config does not accept that by name.

    With the posterior columns (`with_probe_posterior`) and the run's group size G, "too little" is an
    expected share of mixed groups below `MIN_EXPECTED_MIXED` (mean over the subset of
    `posterior.expected_mixed_posterior` at G); without them (a subset written before they were), no
    example with 0 < pass rate < 1."""
    n_mixed = int(mixed(subset["pass_rate"]).sum())
    raw = f"{n_mixed} of {subset.height} examples have 0 < pass rate < 1"
    rates = ", ".join(f"{r:g}" for r in sorted(set(subset["pass_rate"].to_list())))
    if group_size and set(POSTERIOR_COLUMNS) <= set(subset.columns):
        share = mixed_share(subset, group_size)
        line = f"expected share of mixed groups {share:.2f} at G={group_size} from the posterior; {raw} in the probe"
        low = not share >= MIN_EXPECTED_MIXED
        why = (f"expected share of mixed groups {share:.2f} at G={group_size} from the posterior, below "
               f"{MIN_EXPECTED_MIXED:g} ({raw}; pass rates in {{{rates}}})")
    else:
        line, low = raw, n_mixed == 0
        why = f"no learnable example: every pass rate is in {{{rates}}}"
    if not low:
        return line
    if allowed:
        return line + f": too little, accepted by selection.allow_unlearnable ({strategy})"
    raise UnlearnableSubsetError(
        f"subset {strategy!r} has {why}, so nearly every GRPO group would agree (no advantage, loss 0, no "
        f"gradient). Pick another strategy or pool, probe with a larger probe.k, or accept it by name: "
        f"selection.allow_unlearnable: [{strategy}]")


def sampling_mismatch(probe: dict[str, Any] | None, grpo: dict[str, Any]) -> str | None:
    """A warning line when the probe sampled (`probe`: its provenance or settings, with temperature, top_p,
    max_new_tokens) otherwise than GRPO samples (`grpo`: temperature, top_p, max_completion_length), else
    None; None too when the probe's settings are unknown. Never an error: a colder or shorter probe is a
    legitimate choice, but its pass rates are not GRPO's."""
    if not probe:
        return None
    pairs = [("temperature", "temperature", "temperature"), ("top_p", "top_p", "top_p"),
             ("max length", "max_new_tokens", "max_completion_length")]
    diffs = [f"{name} {probe[pk]:g} in the probe vs {grpo[gk]:g} in GRPO (probe.{pk}, grpo.{gk})"
             for name, pk, gk in pairs
             if probe.get(pk) is not None and grpo.get(gk) is not None and float(probe[pk]) != float(grpo[gk])]
    if not diffs:
        return None
    return ("WARNING: the probe did not sample as GRPO does: " + "; ".join(diffs) + ". Pass rates, the selection "
            "and the expected share of mixed groups describe the probe's decoding, not GRPO's.")


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
