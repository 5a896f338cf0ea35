"""Selection strategies: pure functions of the probe table, a budget p and a seed.

Ties in pass rate are broken by a seeded shuffle, not by dataset order (the released code of paper 1
kept dataset order, which with K = 5 decides much of each subset); `rank` records the order.

Tier strategies (paper 2: train only on lower-difficulty problems, e.g. MATH levels 1-3) are named
after a tier of `selection.tiers`: ``tier_<name>`` is every pool example whose `tier` is one of the
tier's values, and ``tier_<name>_random`` is its size-matched random control drawn from the whole
pool. They ignore the budget p and the pass rates; they only read the probe table's `tier` column.

The names are defined here: the strategies' and a training run's (the controls' are the records of
hardex.controls.REGISTRY). A run's name (a strategy, its online run ``<strategy>_online`` or a control run
``<strategy>_<control>``), which paths, params and tables carry, is built and taken apart by `RunName` alone.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import polars as pl

from hardex.controls import REGISTRY as CONTROL_REGISTRY
from hardex.metrics import expected_mixed

# The strategy names, written here only. Order: as tables and legends show them (paper 1's order).
#: floor(p N) examples by pass rate: lowest, a window around the median, highest; and at random
BUDGET_STRATEGIES = ("hard", "medium", "easy", "random")
#: of those, the ones whose subset ends at a pass-rate boundary (adaptive probing must settle them)
BOUNDARY_STRATEGIES = ("hard", "medium", "easy")
#: floor(p N) examples filtered offline as RL recipes do: pass rate inside a window (`selection.band`;
#: open-r1 keeps 0.1-0.6, PRIME 0.2-0.8), or the highest expected share of mixed groups of size G
FILTER_STRATEGIES = ("band", "learnable")
#: the base model's greedy answer wrong / right (size-matched), their random control, the whole pool
BASE_SPLIT_STRATEGIES = ("base_wrong", "base_right", "matched_random", "full")
STRATEGIES = BUDGET_STRATEGIES + FILTER_STRATEGIES + BASE_SPLIT_STRATEGIES
#: the settings a strategy reads beyond the budget and the seed, by the select rule's params that carry them (`select`'s
#: `band`, `group_size` and `in_tiers`): each goes to the strategies that read it, None to the others, so editing the
#: band reruns band alone (settings.select_settings). Every tier strategy reads its tier's values (`TIER_SETTINGS`)
STRATEGY_SETTINGS: dict[str, tuple[str, ...]] = {"band": ("band",), "learnable": ("group_size",)}
TIER_SETTINGS = ("tiers",)
#: control runs (`selection.controls`): <strategy>_<control> trains on <strategy>'s subset with a control
#: reward instead of the true one. Each control is a record of hardex.controls.REGISTRY (its reward, log line, line
#: style, the headline's preference): `shuffled` scores against another example's reference answer, `format` pays
#: for where and how an answer is written, `random_reward` pays at random at the true reward's rate. Their gain is
#: what form, or any reward at all, buys. (Not `random`: `tier_low_random` is a strategy.) A live view of the
#: registry's names, in its order (as tables and legends show them, each after its strategy).
CONTROLS = CONTROL_REGISTRY.keys()
#: a run named <strategy>_online trains on <strategy>'s subset with online filtering (hardex.training)
_ONLINE = "_online"


#: tier_<name> and tier_<name>_random; tier names are letters and digits, so the suffix is unambiguous
TIER_STRATEGY = re.compile(r"^tier_([A-Za-z0-9]+)(_random)?$")


class SelectionError(ValueError):
    pass


def parse_tier_strategy(strategy: str) -> tuple[str, bool] | None:
    """``"tier_low"`` -> ``("low", False)``, ``"tier_low_random"`` -> ``("low", True)``, else None."""
    m = TIER_STRATEGY.match(strategy)
    return (m.group(1), m.group(2) is not None) if m else None


@dataclass(frozen=True)
class RunName:
    """A training run's identity as its name carries it (the rules' `strategy` wildcard, the tables'
    `strategy` column): the strategy that chose its subset, whether it trains with online filtering, and its
    control (`CONTROLS`) or None. `parse` takes a name apart, `str` writes it: ``hard_online`` is
    ``RunName("hard", online=True)``, ``full_shuffled`` is ``RunName("full", control="shuffled")``. Controls
    of online runs do not exist."""

    strategy: str
    online: bool = False
    control: str | None = None

    def __post_init__(self):
        if self.control is not None and (self.control not in CONTROLS or self.online):
            raise ValueError(f"no run {self.strategy!r} with online={self.online} and control={self.control!r}; "
                             f"controls: {', '.join(CONTROLS)}, of runs without online filtering")

    @classmethod
    def parse(cls, name: str) -> RunName:
        """The run a name names. A control or online suffix counts only where what it follows is a strategy, so
        a tier named ``format`` or ``online`` (``tier_format``) stays a tier strategy, and
        ``tier_low_random_format`` is the format control of tier_low's random draw."""
        for control in CONTROLS:
            suffix = "_" + control
            if name.endswith(suffix) and is_strategy(name[: -len(suffix)]):
                return cls(name[: -len(suffix)], control=control)
        if name.endswith(_ONLINE) and is_strategy(name[: -len(_ONLINE)]):
            return cls(name[: -len(_ONLINE)], online=True)
        return cls(name)

    def __str__(self) -> str:
        if self.control is not None:
            return f"{self.strategy}_{self.control}"
        return self.strategy + _ONLINE if self.online else self.strategy


def is_strategy(strategy: str) -> bool:
    """Whether `strategy` names a fixed strategy or a tier strategy."""
    return strategy in STRATEGIES or parse_tier_strategy(strategy) is not None


def strategy_sort_key(name: str) -> tuple[int, str]:
    """A run name's display order: STRATEGIES' order first, each online run and then each control after the
    strategy whose subset it trains on, other names (tier strategies) after, alphabetically."""
    run = RunName.parse(name)
    slots = 2 + len(CONTROLS)  # the strategy, its online run, its controls
    if run.strategy in STRATEGIES:
        slot = 1 if run.online else 2 + list(CONTROLS).index(run.control) if run.control else 0
        return (slots * STRATEGIES.index(run.strategy) + slot, "")
    return (slots * len(STRATEGIES), name)


def settings_read(strategy: str) -> tuple[str, ...]:
    """The settings `strategy` reads beyond the budget and the seed (STRATEGY_SETTINGS, TIER_SETTINGS)."""
    return TIER_SETTINGS if parse_tier_strategy(strategy) else STRATEGY_SETTINGS.get(strategy, ())


def tier_values(tiers: dict[str, Any], strategy: str, task: str) -> list[str] | None:
    """The tier values a strategy selects on `task`, as strings (the probe table's `tier` is text).

    `tiers` is the config's `selection.tiers`: ``{name: [values]}`` (the same values for every task)
    or ``{name: {task: [values]}}`` (per task; a task missing from the mapping is an error, because
    GSM8K's and MATH's tiers mean different things). None for strategies that are not tier strategies.
    """
    parsed = parse_tier_strategy(strategy)
    if parsed is None:
        return None
    name, _ = parsed
    if name not in (tiers or {}):
        known = ", ".join(sorted(tiers or {})) or "none defined"
        raise SelectionError(f"{strategy}: selection.tiers has no tier {name!r} ({known})")
    values = tiers[name]
    if isinstance(values, dict):
        if task not in values:
            raise SelectionError(
                f"{strategy}: selection.tiers.{name} gives no values for task {task!r} ({', '.join(sorted(values))})"
            )
        values = values[task]
    return [str(v) for v in values]


def tier_subset(probe: pl.DataFrame, values: list[str]) -> pl.DataFrame:
    """Pool rows whose tier is one of `values` (rows without a tier never belong to a tier)."""
    if "tier" not in probe.columns or probe["tier"].is_null().all():
        raise SelectionError("tier strategies need a tier per pool example; this pool has none")
    return probe.filter(pl.col("tier").cast(pl.Utf8).is_in([str(v) for v in values]))


def _rng(seed: int | Sequence[int], strategy: str) -> np.random.Generator:
    salt = int.from_bytes(hashlib.sha256(strategy.encode()).digest()[:4], "big")
    return np.random.default_rng([*np.atleast_1d(seed).tolist(), salt])


def budget_size(n: int, budget: float) -> int:
    """Exactly floor(p * N) examples; zero is an error, not an empty run."""
    m = math.floor(budget * n + 1e-9)
    if m < 1:
        raise SelectionError(f"budget {budget} of a pool of {n} selects no example; raise selection.budget")
    return m


def subset_size(strategy: str, n: int, budget: float) -> int | None:
    """Examples a strategy selects from a pool of n, when n and the budget alone decide it (else None:
    the base-model splits and tier strategies depend on the probe or the pool's tiers)."""
    if strategy in BUDGET_STRATEGIES + FILTER_STRATEGIES:
        return budget_size(n, budget)
    return n if strategy == "full" else None


def base_split_size(probe: pl.DataFrame) -> int:
    """Size of the base_wrong / base_right / matched_random subsets: the smaller of the two sides."""
    wrong = int((~probe["greedy_correct"]).sum())
    return min(wrong, probe.height - wrong)


def check_band(band: Sequence[float]) -> tuple[float, float]:
    """A pass-rate window (lo, hi) with 0 <= lo <= hi <= 1, or a SelectionError saying what is wrong."""
    if len(band) != 2:
        raise SelectionError(f"selection.band must be [lo, hi], got {list(band)}")
    lo, hi = (float(v) for v in band)
    if not (0 <= lo <= 1 and 0 <= hi <= 1):
        raise SelectionError(f"selection.band [{lo}, {hi}] lies outside [0, 1]: it is a window of pass rates")
    if lo > hi:
        raise SelectionError(f"selection.band [{lo}, {hi}] is reversed: lo must not exceed hi")
    return lo, hi


def select(
    probe: pl.DataFrame,
    strategy: str,
    budget: float,
    seed: int,
    in_tiers: list[Any] | None = None,
    band: Sequence[float] | None = None,
    group_size: int | None = None,
) -> pl.DataFrame:
    """The subset for one strategy: columns id, pass_rate, rank (0 = first chosen).

    `in_tiers` is read by tier strategies only: the tier values of the strategy's tier on this task,
    as `tier_values(config["selection"]["tiers"], strategy, task)` gives them. `band` (lo, hi) is read by
    `band`: examples inside the window first, then the nearest outside it when the window holds fewer
    than the budget. `group_size` (the run's G) is read by `learnable`: examples by their expected share
    of mixed groups (`hardex.metrics.expected_mixed`, from the probe's n_correct of k), highest first.
    """
    if not is_strategy(strategy):
        raise SelectionError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}, tier_<name>[_random]")
    n = probe.height
    # seeded tie-break key shared by the difficulty-ordered strategies
    df = probe.with_columns(pl.Series("_tie", _rng(seed, "tie-break").permutation(n)))
    by_difficulty = df.sort(["pass_rate", "_tie"])  # hardest first
    if strategy in BOUNDARY_STRATEGIES:
        m = budget_size(n, budget)
        if strategy == "hard":
            chosen = by_difficulty.head(m)
        elif strategy == "easy":
            chosen = df.sort(["pass_rate", "_tie"], descending=[True, False]).head(m)
        else:  # a window of m centred on the median of the difficulty order
            chosen = by_difficulty.slice((n - m) // 2, m)
    elif strategy == "band":
        if band is None:
            raise SelectionError("band needs its pass-rate window (selection.band)")
        lo, hi = check_band(band)
        outside = pl.max_horizontal(lo - pl.col("pass_rate"), pl.col("pass_rate") - hi, pl.lit(0.0))
        chosen = df.with_columns(outside.alias("_outside")).sort(["_outside", "_tie"]).head(budget_size(n, budget))
    elif strategy == "learnable":
        if not group_size:
            raise SelectionError("learnable needs the run's group size (grpo.num_generations)")
        mixed = [expected_mixed(int(c), int(k), int(group_size)) for c, k in zip(df["n_correct"], df["k"])]
        chosen = df.with_columns(pl.Series("_mixed", mixed)).sort(["_mixed", "_tie"], descending=[True, False]) \
            .head(budget_size(n, budget))
    elif strategy == "random":
        chosen = df[_rng(seed, strategy).permutation(n)[: budget_size(n, budget)]]
    elif strategy == "full":
        chosen = df[_rng(seed, strategy).permutation(n)]
    elif parse_tier_strategy(strategy):
        name, control = parse_tier_strategy(strategy)
        if not in_tiers:
            raise SelectionError(f"{strategy}: no tier values given (selection.tiers.{name})")
        members = tier_subset(df, [str(v) for v in in_tiers])
        m = members.height
        if m < 1:
            raise SelectionError(f"{strategy}: no pool example has a tier among {[str(v) for v in in_tiers]}")
        if control:  # size-matched random control from the whole pool
            chosen = df[_rng(seed, strategy).permutation(n)[:m]]
        else:
            chosen = members[_rng(seed, strategy).permutation(m)]
    else:
        if "greedy_correct" not in df.columns:
            raise SelectionError(f"{strategy} needs the base model's greedy outcome in the probe table")
        m = base_split_size(df)
        if m < 1:
            side = "wrong" if not df["greedy_correct"].any() else "right"
            raise SelectionError(f"{strategy}: the base model gets every pool example {side}; "
                                 "no size-matched split exists")
        if strategy == "matched_random":
            chosen = df[_rng(seed, strategy).permutation(n)[:m]]
        else:
            side = df.filter(pl.col("greedy_correct") == (strategy == "base_right"))
            chosen = side[_rng(seed, strategy).permutation(side.height)[:m]]
    return chosen.select(
        pl.col("id"), pl.col("pass_rate"), pl.int_range(pl.len(), dtype=pl.Int64).alias("rank")
    )
