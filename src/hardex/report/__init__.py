"""The report: the papers' tables, the learnable-% regression and the figures, from the workflow's
result files.

Everything here is a function of plain frames (or the files they are read from), so the numbers a
report shows can be recomputed in a notebook. Conventions shared by every table:

- accuracies and gains are in percentage points (the published CSV's fractions are converted);
- "final" is the last checkpoint of a run, and Table 1's numbers use the task's first benchmark
  (the in-distribution test set); every other benchmark of a task counts as out-of-distribution;
- a 95 % interval (the level is a parameter) is a t-interval across seeds when a cell has several
  seeds, and a paired bootstrap over test examples when it has one; Table 1 also gives one over seeds
  and test questions together (`gain_sq`, `hardex.statistics.seeds_and_questions_interval`), and the power
  table the seeds each difference needs (docs/power.md);
- a verdict between strategies is corrected for every pair of its model x task (Holm, the `pairwise`
  table); a gain against the base model or a control is its own question, uncorrected; with one seed
  the intervals resample test questions only, so a verdict says "one seed" and claims nothing across
  training runs;
- the configured scorer (`tasks.<task>.scoring`) decides every accuracy except the `rescored` table's,
  which judges the same stored completions by each scorer of the task, the configured one marked.

Modules: `loading` (reading the result files; the intervals, bootstrap and OLS are `hardex.statistics`), `tables` (the
registry of every table and `build_tables`), and each family of tables: `runs` (every run against its base),
`gains` (Tables 1 and 2, the gain curve), `verdicts` (the verdict tables in each metric), `headline` (the
first table: which strategy gained how much beyond form), `pairwise`, `beyond_controls`, `breakdowns` (OOD,
tiers, base-model splits), `pool` (the pool and its subsets), `rollout_budget`, `power`, `rescoring` and
`sharpening` (the rescored and pass_at_k tables), `catch_up` (paper 2's comparison with the full-pool run),
`by_difficulty`, `dynamics`, `across_tasks` and `recommend`; `regression` (the learnable-% regression),
`reference` (the published numbers), `render` (Markdown, CSV, LaTeX, HTML), `plots` (drawing) and `figures`
(what each figure reads, all drawn in one process), `timings` (compute) and `looks` (a sequential design's
looks and their verdict table).
"""


class AnalysisError(ValueError):
    """Result files that cannot be analysed together (say which file and why)."""
