"""Table 1's columns beyond each control: a strategy's gain minus its control run's (same subset, another
reward: `hardex.controls`), paired by seed, beside the control's learnable %.

Conventions: see `hardex.report`.
"""

from __future__ import annotations

import polars as pl

from hardex.report.loading import Results
from hardex.report.runs import CELL_KEYS, gains_by_run, run_difference
from hardex.selection import CONTROLS, RunName


def gain_beyond_controls(gains: pl.DataFrame, summary: pl.DataFrame, res: Results, level: float = 0.95,
                         n_boot: int = 2000, seed: int = 0) -> pl.DataFrame:
    """Table 1's columns beyond_<control> (with _ci_low, _ci_high), one set per control that ran
    (`selection.controls`, hardex.controls): a strategy's gain minus the gain of its control run
    <strategy>_<control> (same subset, another reward), paired by seed (run_difference), and
    learnable_<control>: the control run's learnable % (mean over its seeds), beside `learnable_pct`, the
    row's own: a control whose groups never mix never trained, and a gain beyond it says nothing. Null for
    control rows, online runs, strategies whose control did not run or shares no seed with them. Without
    any control run the table is returned unchanged."""
    ran = {RunName.parse(s).control for s in summary["strategy"].unique()}
    present = [c for c in CONTROLS if c in ran]
    if not present or gains.height == 0:
        return gains
    gain_of = gains_by_run(summary)
    learnable = {(m, t, s): v for m, t, s, v in summary.group_by(CELL_KEYS).agg(
        pl.col("learnable_pct").fill_nan(None).mean()).iter_rows()}  # null where no run recorded its steps
    columns: dict[str, list] = {"learnable_pct": [learnable.get(k) for k in gains.select(CELL_KEYS).iter_rows()]}
    runs = [RunName.parse(s) for s in gains["strategy"]]
    for control in present:
        mean, low, high, control_learnable = [], [], [], []
        for (model, task, strategy), run in zip(gains.select(CELL_KEYS).iter_rows(), runs):
            # a control run and an online run have no control run of their own
            versus = str(RunName(run.strategy, control=control)) if not run.online and not run.control else None
            d, lo, hi = (run_difference(res, gain_of, model, task, strategy, versus, level, n_boot, seed) if versus
                         else (None,) * 3)
            mean.append(d)
            low.append(lo)
            high.append(hi)
            control_learnable.append(learnable.get((model, task, versus)) if d is not None else None)
        columns |= {f"beyond_{control}": mean, f"beyond_{control}_ci_low": low, f"beyond_{control}_ci_high": high,
                    f"learnable_{control}": control_learnable}
    return gains.with_columns([pl.Series(name, values, dtype=pl.Float64) for name, values in columns.items()])


def beyond_controls_note(gains: pl.DataFrame, pct: str) -> str:
    """What Table 1's beyond_<control> columns mean, for its note ("" without them)."""
    controls = [c.removeprefix("beyond_") for c in gains.columns if c.startswith("beyond_") and "_ci_" not in c]
    if not controls:
        return ""
    return (f" Control runs (<strategy>_<control>, hardex.controls: shuffled is rewarded against another example's "
            f"reference answer, format for where and how an answer is written, the random reward at random at the "
            f"true reward's rate) train on their strategy's subset; their own gain is what form, or any reward at "
            f"all, buys. {', '.join(f'beyond_{c}' for c in controls)}: the strategy's gain minus its control's, "
            f"paired by seed (mean over the seeds both ran, {pct} t-interval over them; with one shared seed a "
            f"paired bootstrap over test questions): the gain the skill bought beyond it; each is its own "
            f"question, uncorrected for the others. learnable_pct: the run's learnable % (as in Table 2); "
            f"{', '.join(f'learnable_{c}' for c in controls)}: its control's, to read beside it: a control whose "
            f"groups seldom mixed barely trained, and beating it shows little. Empty where that control did not "
            f"run.")
