"""Seeds in batches: a group-sequential design that adds seeds to a study's runs until each deciding
comparison (two runs of a model x task, the mean of their paired differences over seeds) is decided.

The data are looked at when the runs have `Design.looks` seeds (numbered from 1). Each interim look tests at
a small fixed level (`INTERIM_ALPHA`, 0.001: Haybittle and Peto's boundary) and the last look at what is
left of alpha, so the levels sum to alpha. The looks are combined by the union bound (Bonferroni across
looks): the chance of any false verdict over all looks is at most that sum, whatever the correlation
between looks. The usual boundaries that use the correlation assume a normal statistic of known variance,
which 2 to 16 seeds with an estimated variance are not; the union bound needs nothing of the kind. Why
Haybittle-Peto rather than an O'Brien-Fleming-type spending function: under the union bound, O'Brien-Fleming's
late alpha is shared among the late looks (with 4, 6, ..., 16 seeds its last look tests at 0.014 of 0.05,
and a study that runs to its maximum loses a third of its power against a fixed design of 16 seeds), while
Haybittle-Peto's last look keeps 0.044: an early stop still needs a large effect (at 8 seeds a difference of
about 1.5 standard deviations), and a study that runs to its end loses little.

Within a look the comparisons still open are one family, Holm-adjusted at alpha_k: the p's of a zero
difference, and separately the equivalence p's (`statistics.t_test_p`), as `report.pairwise.
pair_verdict` does. A comparison decided at a look keeps its verdict and gets no more seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Hashable, Mapping

from hardex.statistics import DIFFERS, holm, t_test_p

BASE_RUN = "base"  # the base model: it never trains, so it needs no seeds


@dataclass(frozen=True)
class Design:
    """Seeds in batches: `first` seeds, then `batch` more at a time, up to `max`."""

    first: int
    batch: int
    max: int

    @property
    def looks(self) -> list[int]:
        """The seed counts at which the data are looked at; `max` is always the last."""
        return list(range(self.first, self.max, self.batch)) + [self.max]

    def seeds_at(self, look: int) -> list[int]:
        """The seed ids a look (from 1) uses: 0 .. its seed count - 1."""
        return list(range(self.looks[look - 1]))


def design_of(seeds: Any) -> Design | None:
    """The config's `seeds`: a mapping {first, batch, max} is a sequential design, a list a fixed one (None)."""
    if not isinstance(seeds, Mapping):
        return None
    values = {}
    for key, least in (("first", 2), ("batch", 1), ("max", 2)):
        value = seeds.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"seeds.{key}: an integer of at least {least} (got {value!r})")
        values[key] = value
    if unknown := sorted(set(seeds) - set(values)):
        raise ValueError(f"seeds.{unknown[0]}: unknown key (seeds takes first, batch and max)")
    if values["max"] < values["first"]:
        raise ValueError(f"seeds.max: at least seeds.first ({values['first']}; got {values['max']})")
    return Design(**values)


INTERIM_ALPHA = 0.001  # each interim look's level (Haybittle-Peto); the last look gets the rest


def spent_alpha(design: Design, alpha: float) -> list[float]:
    """Each look's level: INTERIM_ALPHA at the interim looks (less where there are so many that they would
    take over half of alpha), the rest of alpha at the last; they sum to alpha."""
    interim = len(design.looks) - 1
    level = min(INTERIM_ALPHA, alpha / 2 / interim) if interim else 0.0
    return [level] * interim + [alpha - level * interim]


@dataclass(frozen=True)
class LookTest:
    """One comparison at one look: its seeds, mean difference and p's (`t_test_p`)."""

    seeds: int
    difference: float
    p: float
    p_equivalence: float


@dataclass(frozen=True)
class Verdict:
    """A comparison's verdict: `pair_verdict`'s words ("undecided at N seeds"), at its look (from 1; 0
    before the first), with the look's mean difference, raw p's and level; final when no more seeds come."""

    verdict: str
    seeds: int
    look: int
    final: bool
    difference: float = math.nan
    p: float = math.nan
    p_equivalence: float = math.nan
    level: float = math.nan

    @property
    def decided(self) -> bool:
        return not self.verdict.startswith("undecided")


def look_tests(design: Design, differences: Mapping[int, float], margin: float) -> list[LookTest]:
    """The tests of the looks a comparison's differences (seed -> difference) reach: look k needs seeds
    0 .. n_k - 1 and uses only those."""
    tests = []
    for n in design.looks:
        if any(seed not in differences for seed in range(n)):
            break
        values = [differences[seed] for seed in range(n)]
        p, p_equivalence = t_test_p(values, margin)
        tests.append(LookTest(n, sum(values) / n, p, p_equivalence))
    return tests


def verdicts_from_tests(design: Design, tests: Mapping[Hashable, list[LookTest]], alpha: float,
                        margin: float) -> dict[Hashable, Verdict]:
    """The stopping rule on each comparison's look tests (`look_tests`). A look is taken only when every
    comparison still open reaches it, so each look's Holm family is whole."""
    verdicts: dict[Hashable, Verdict] = {}
    open_ = list(tests)
    within = f"within ±{margin:g}"
    looks = design.looks
    for k, level in enumerate(spent_alpha(design, alpha), start=1):
        if not open_ or any(len(tests[name]) < k for name in open_):
            break
        now = [tests[name][k - 1] for name in open_]
        differs = [p < level for p in holm([t.p for t in now])]
        equivalent = [p < level for p in holm([t.p_equivalence for t in now])]
        for name, t, differ, same in zip(list(open_), now, differs, equivalent):
            text = f"{DIFFERS}, {within}" if differ and same else DIFFERS if differ else \
                f"equivalent {within}" if same else f"undecided at {t.seeds} seeds"
            verdicts[name] = Verdict(text, t.seeds, k, differ or same or k == len(looks), t.difference, t.p,
                                     t.p_equivalence, level)
            if differ or same:
                open_.remove(name)
    for name in tests:  # no look taken yet
        verdicts.setdefault(name, Verdict("undecided at 0 seeds", 0, 0, False))
    return verdicts


def decide(design: Design, differences_by_comparison: Mapping[Hashable, Mapping[int, float]], alpha: float,
           margin: float, history: Mapping[Hashable, Verdict] | None = None) -> dict[Hashable, Verdict]:
    """Each deciding comparison's verdict from its paired differences by seed (seed -> points, the seeds
    both runs have), the looks applied in order from the first. The rule is replayed from the first look
    each time, so a decided verdict stays as long as its seeds' results do; `history` (an earlier call's
    verdicts) makes that a check: a decided verdict that changes is an error."""
    tests = {name: look_tests(design, d, margin) for name, d in differences_by_comparison.items()}
    verdicts = verdicts_from_tests(design, tests, alpha, margin)
    for name, verdict in verdicts.items():
        if verdict.look == 0:  # before the first look: undecided at the seeds it has
            held = next(n for n in range(len(differences_by_comparison[name]) + 1)
                        if n not in differences_by_comparison[name])
            verdicts[name] = replace(verdict, verdict=f"undecided at {held} seeds", seeds=held)
    for name, before in (history or {}).items():
        now = verdicts.get(name)
        if before.decided and (now is None or (now.verdict, now.look) != (before.verdict, before.look)):
            raise ValueError(f"comparison {name}: decided '{before.verdict}' at {before.seeds} seeds, now "
                             f"'{now.verdict if now else 'missing'}': the results of its seeds changed or are missing")
    return verdicts


def runs_needing_seeds(verdicts: Mapping[Hashable, Verdict],
                       comparisons: Mapping[Hashable, tuple[str, str]]) -> set[str]:
    """The runs that get the next batch of seeds: those in a comparison that is undecided and not final
    (or has no verdict yet); the base model never does."""
    runs = set()
    for name, pair in comparisons.items():
        verdict = verdicts.get(name)
        if verdict is None or not (verdict.decided or verdict.final):
            runs |= set(pair)
    return runs - {BASE_RUN}
