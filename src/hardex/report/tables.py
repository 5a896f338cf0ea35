"""The report's tables as a registry (`REGISTRY`: name -> title and builder, in the report's order) and
`build_tables`, which builds each from what they share (`TableInputs`).

What a table computes is its family's module (`runs`, `gains`, `pairwise`, `beyond_controls`, `breakdowns`,
`pool`, `rollout_budget`, `power`, `verdicts`, `catch_up`, `sharpening`, `dynamics`, `by_difficulty`,
`across_tasks`, `recommend`); a builder here only picks its inputs and joins its note to the notes it shares.
Conventions: see `hardex.report`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Sequence

import polars as pl

from hardex.report.across_tasks import across_tasks_table, contrast_meta_analysis, recommendation_check
from hardex.report.beyond_controls import beyond_controls_note
from hardex.report.breakdowns import OOD_NOTE, base_split_note, base_split_table, ood_table, tier_note, tier_table
from hardex.report.by_difficulty import gain_by_difficulty, gain_by_difficulty_note
from hardex.report.catch_up import EQUIVALENCE_MARGIN, catch_up_note, catch_up_table
from hardex.report.dynamics import dynamics_note, dynamics_table
from hardex.report.gains import accuracy_gain_note, gain_curve_note, learnable_note, learnable_table
from hardex.report.headline import COMPACT, answer_lines
from hardex.report.loading import Results, load_overlaps
from hardex.report.pairwise import pairwise_note
from hardex.report.pool import EXPECTED_LEARNABLE_NOTE, POOL_NOTE, pool_distribution, subset_pass_rates, subsets_note
from hardex.report.power import power_note
from hardex.report.recommend import recommend_table
from hardex.report.reference import with_reference
from hardex.report.rollout_budget import rollout_budget, rollout_budget_note
from hardex.report.runs import CELL_KEYS, RUNS_NOTE, in_paper_order
from hardex.report.sharpening import pass_at_k_note, pass_at_k_table
from hardex.report.verdicts import by_metric, metric_disagreements, metric_verdicts, metrics_note

#: a built table: (frame, note), or (frame, note, layout) where `render.write_table` lays it out otherwise
Built = tuple


@dataclass(frozen=True)
class TableInputs:
    """What the tables are built from (`build_tables`' arguments), and the frames and notes several tables
    share, each computed once."""

    res: Results
    probes: pl.DataFrame
    subsets: pl.DataFrame
    level: float
    n_boot: int
    seed: int
    ref: pl.DataFrame | None
    names: dict | None
    group_sizes: dict[str, int] | None
    overlaps: pl.DataFrame | None
    margin: float
    rescored: tuple[pl.DataFrame, str] | None
    power: dict[str, Any]
    metrics: Sequence[str]

    @cached_property
    def verdicts(self) -> dict[str, dict[str, Any]]:
        """metric -> its verdict tables (`verdicts.metric_verdicts`); the first metric's decide."""
        return {m: metric_verdicts(self.res.in_metric(m), self.level, self.n_boot, self.seed, self.margin, self.power)
                for m in self.metrics}

    @property
    def first(self) -> dict[str, Any]:
        """The first metric's verdict tables: the tables that are not verdicts read these."""
        return self.verdicts[self.metrics[0]]

    @cached_property
    def subsets_table(self) -> pl.DataFrame:
        """The subset_pass_rates table, with the expected learnable % where the group sizes are known."""
        return subset_pass_rates(self.probes, self.subsets, self.group_sizes)

    @property
    def expected_note(self) -> str:
        return EXPECTED_LEARNABLE_NOTE if self.group_sizes is not None else ""

    @cached_property
    def gains(self) -> pl.DataFrame:
        """Table 1 in every metric, with the published columns where a reference is given."""
        return with_reference(by_metric(self.verdicts, "gains"), self.ref, {
            "base_accuracy": "published_base_accuracy", "final_accuracy": "published_final_accuracy",
            "gain": "published_gain"}, self.names)

    @cached_property
    def reference_note(self) -> str:
        if self.ref is None:
            return ""
        matched = self.gains["published_gain"].is_not_null().sum()
        return (f" Published columns: the reference run with the same model, task and strategy "
                f"(names mapped by report.reference_names); {matched} of {self.gains.height} rows matched.")

    @property
    def pct(self) -> str:
        return f"{round(100 * self.level)} %"

    @cached_property
    def metric_note(self) -> str:
        return metrics_note(self.metrics)


def _headline(t: TableInputs) -> Built:
    # the answer first (the first metric's, and where another metric disagrees), then the compact table, then
    # the full reading and what the columns mean
    answer = "\n\n".join([*answer_lines(t.first["headline"][0], t.metrics[0]), *metric_disagreements(t.verdicts)])
    layout = {"columns": COMPACT, "footnote": t.metric_note + " " + t.first["headline"][1]}
    return by_metric(t.verdicts, "headline"), answer, layout


def _accuracy_gain(t: TableInputs) -> Built:
    return t.gains, (accuracy_gain_note(t.level, t.n_boot) + beyond_controls_note(t.gains, t.pct) + t.reference_note
                     + " " + t.metric_note)


def _runs(t: TableInputs) -> Built:
    return by_metric(t.verdicts, "runs"), RUNS_NOTE


def _gain_curve(t: TableInputs) -> Built:
    return by_metric(t.verdicts, "gain_curve"), gain_curve_note(t.level) + " " + t.metric_note


def _training_dynamics(t: TableInputs) -> Built:
    return dynamics_table(t.res.steps, t.subsets_table if t.group_sizes is not None else None), dynamics_note()


def _pairwise(t: TableInputs) -> Built:
    return by_metric(t.verdicts, "pairwise"), pairwise_note(t.level, t.margin, t.n_boot) + " " + t.metric_note


def _learnable(t: TableInputs) -> Built:
    learn = learnable_table(t.first["runs"], t.level)
    if t.group_sizes is not None:
        learn = learn.join(t.subsets_table.select(*CELL_KEYS, "expected_learnable_pct",
                                                  "expected_learnable_pct_posterior"), on=CELL_KEYS, how="left")
    learn = with_reference(learn, t.ref, {"learnable_pct": "published_learnable_pct"}, t.names)
    return learn, learnable_note(t.level) + t.expected_note + t.reference_note


def _ood_pass_at_k(t: TableInputs) -> Built:
    return ood_table(t.res), OOD_NOTE


def _base_split(t: TableInputs) -> Built:
    split = base_split_table(t.first["gains"], t.subsets)
    return split, base_split_note(split)


def _tier_accuracy(t: TableInputs) -> Built:
    tiers = tier_table(t.res)
    return tiers, tier_note(tiers)


def _gain_by_difficulty(t: TableInputs) -> Built:
    return (gain_by_difficulty(t.res, t.metrics, t.level, t.n_boot, t.seed),
            gain_by_difficulty_note(t.level, t.n_boot) + " " + t.metric_note)


def _pool_pass_rates(t: TableInputs) -> Built:
    return pool_distribution(t.probes), POOL_NOTE


def _subset_pass_rates(t: TableInputs) -> Built:
    return t.subsets_table, subsets_note(t.subsets_table, t.group_sizes is not None)


def _catch_up(t: TableInputs) -> Built:
    catch = catch_up_table(t.res.runs, t.level, base=t.res.base, margin=t.margin).with_row_index("_row")
    catch = in_paper_order(catch, ["model", "task", "strategy", "_row"]).drop("_row")  # paper order, rows kept
    return catch, catch_up_note(catch, t.level)


def _data_overlap(t: TableInputs) -> Built:
    return (t.overlaps if t.overlaps is not None else load_overlaps([]),
            "Questions of each benchmark that are also in the task's pool: exact, only after "
            "normalizing case, spacing and punctuation, or as the same problem in other words or order "
            "(same_problem: a generated family's canonical form, e.g. 4 + 3 for 3 + 4). A task with more "
            "than tasks.<task>.allow_overlap (allowed) of them stops before probing: its gain would be "
            "measured on training data. near_duplicates: the other benchmark questions with the same "
            "numbers and operators as a pool question (same_numbers) or an 8-word run in common "
            "(shared_ngram, template wording left out); refused beyond "
            "tasks.<task>.allow_near_duplicates (allowed_near; empty: reported only). Where pool and "
            "benchmark both have a canonical form, it decides alone.")


def _rollout_budget(t: TableInputs) -> Built:
    budget = rollout_budget(t.first["gains"], t.res.steps, t.probes)
    return budget, rollout_budget_note(budget, t.level)


def _rescored(t: TableInputs) -> Built:
    # the rescored table reads the completions and the benchmarks' data: the caller builds it
    if t.rescored is not None:
        return t.rescored
    return (pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8}),
            "Not rescored: the completions were not rescored for this report (report.rescoring.rescored_table).")


def _pass_at_k(t: TableInputs) -> Built:
    return pass_at_k_table(t.res, t.level, seed=t.seed), pass_at_k_note(t.level)


def _power(t: TableInputs) -> Built:
    p = t.power
    return by_metric(t.verdicts, "power"), power_note(p["power"], p["alpha"], p["max_seeds"]) + " " + t.metric_note


def _across_tasks(t: TableInputs) -> Built:
    return (across_tasks_table(by_metric(t.verdicts, "headline"), t.probes, t.metrics),
            "One row per metric x model x task: the pool's profile from the probe (pool: examples; "
            "never_solved_pct, always_solved_pct, mixed_pct: shares solved in none, all, some of the "
            "K samples), then each strategy's gain over the base model in points with the headline's "
            f"{t.pct} interval, verdict and seeds. " + t.metric_note)


def _hard_vs_easy(t: TableInputs) -> Built:
    contrast, note = contrast_meta_analysis(by_metric(t.verdicts, "pairwise"), t.probes, t.metrics, level=t.level)
    return contrast, note + " " + t.metric_note


def _recommend_check(t: TableInputs) -> Built:
    if t.group_sizes is None:
        check, note = (pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8}),
                       "Not checked: the report was built without the runs' group sizes.")
    else:
        check, note = recommendation_check(by_metric(t.verdicts, "headline"), by_metric(t.verdicts, "pairwise"),
                                           recommend_table(t.subsets_table), t.metrics, level=t.level)
    return check, note + " " + t.metric_note


@dataclass(frozen=True)
class Table:
    """A table of the report: its title (its page's heading and the HTML report's label) and its builder."""

    title: str
    build: Callable[[TableInputs], Built]


#: every table of the report, in the report's order (the headline first: it opens the HTML report)
REGISTRY = {
    "headline": Table("Headline: which strategy gained how much beyond form", _headline),
    "accuracy_gain": Table("Accuracy gain over the base model (Table 1)", _accuracy_gain),
    "runs": Table("Every run, seed by seed: base and final accuracy, gain and learnable %", _runs),
    "gain_curve": Table("Gain over the base model at every checkpoint: the gain-by-step curve of each strategy",
                        _gain_curve),
    "training_dynamics": Table("Training dynamics: reward, mixed groups, completion length, truncation and KL at "
                               "every step", _training_dynamics),
    "pairwise": Table("Every pair of strategies: which differ and which are equivalent, after Holm's correction",
                      _pairwise),
    "learnable": Table("Learnable % of training steps (Table 2)", _learnable),
    "ood_pass_at_k": Table("Out-of-distribution pass@k (Table 4)", _ood_pass_at_k),
    "base_split": Table("Base-wrong vs base-right vs size-matched random vs full pool", _base_split),
    "tier_accuracy": Table("Accuracy per difficulty tier, base model and final checkpoint", _tier_accuracy),
    "gain_by_difficulty": Table("Gain by difficulty: accuracy per bin of the base model's own pass rate on each "
                                "test question", _gain_by_difficulty),
    "pool_pass_rates": Table("Pass-rate distribution of the training pool", _pool_pass_rates),
    "subset_pass_rates": Table("Pass rates of each selected subset", _subset_pass_rates),
    "catch_up": Table("Share of the full-pool run's steps, and whether final accuracy is equivalent to that run's "
                      "(paper 2's catch-up)", _catch_up),
    "data_overlap": Table("Pool against benchmarks: questions in both", _data_overlap),
    "rollout_budget": Table("Rollouts and tokens generated per strategy, probing included, against its gain",
                            _rollout_budget),
    "rescored": Table("Base and final accuracy rescored by every scorer of the task: form against skill", _rescored),
    "pass_at_k": Table("pass@k of the base model at large k against each strategy's final checkpoint: sharpening "
                       "against new solving", _pass_at_k),
    "power": Table("Seeds needed to tell each difference between strategies from zero (paired t, power analysis)",
                   _power),
    "across_tasks": Table("Every task side by side: each pool's pass-rate profile and each strategy's gain with its "
                          "verdict", _across_tasks),
    "hard_vs_easy": Table("Hard minus easy on every task, pooled over the tasks (random effects)", _hard_vs_easy),
    "recommend_check": Table("The probe's recommendation checked leaving one task out, beside always hard and "
                             "always random", _recommend_check),
}

#: name -> title, in the report's order: the files the report rule writes and each page's heading (the rules
#: unpack it as (name, title) pairs)
TABLES = {name: table.title for name, table in REGISTRY.items()}


def build_tables(res: Results, probes: pl.DataFrame, subsets: pl.DataFrame, level: float = 0.95,
                 n_boot: int = 2000, seed: int = 0, ref: pl.DataFrame | None = None,
                 names: dict | None = None, group_sizes: dict[str, int] | None = None,
                 overlaps: pl.DataFrame | None = None,
                 margin: float = EQUIVALENCE_MARGIN, rescored: tuple[pl.DataFrame, str] | None = None,
                 power: dict[str, Any] | None = None, metrics: Sequence[str] = ("sampled",)
                 ) -> dict[str, Built]:
    """Every table of the report as {name: (frame, note)}; published columns added when `ref` is given; the
    headline's entry has a third element, how it is written (`render.write_table`'s columns and footnote: its
    note is the answer, its footnote the full reading and the definitions); the learnable % expected from the
    probe beside the measured one when `group_sizes` (model -> G) is;
    `margin`: report.equivalence_margin, in points, of the catch-up and pairwise tables' equivalence tests;
    `rescored`: the `rescored` table and its note (it reads the completions and the benchmarks' data);
    `power` is the config's report.power (power, alpha, max_seeds) for the power table; `metrics`
    (report.metrics, `loading.METRICS`): the verdict tables (headline, accuracy_gain, runs, gain_curve, pairwise, power)
    hold one block of rows per metric, column `metric`; the other tables read the first."""
    inputs = TableInputs(res, probes, subsets, level, n_boot, seed, ref, names, group_sizes, overlaps, margin,
                         rescored, {"power": 0.8, "alpha": 0.05, "max_seeds": 1000} | (power or {}), metrics)
    return {name: table.build(inputs) for name, table in REGISTRY.items()}
