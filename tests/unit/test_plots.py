"""Every report figure is written as a real PNG and PDF, with and without the published overlay,
and on degenerate results (no spread, one run) as well."""

from __future__ import annotations

import json
import struct

import polars as pl
import pytest

from hardex.report import loading, plots as P, tables
from hardex.report.dynamics import dynamics_by_step
from hardex.report.gains import gain_table, learnable_table
from hardex.report.reference import load_reference, reference_curves
from hardex.report.regression import regression_report
from hardex.report.rollout_budget import rollout_budget
from hardex.report.runs import accuracy_curves, run_summary
from tests.support import BENCHMARKS, PASS_K, write_results

STYLE = {"dpi": 60}  # small files, same drawing code


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def _check(paths, min_px=(300, 200)):
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    w, h = _png_size(paths[0])
    assert w >= min_px[0] and h >= min_px[1]
    assert paths[1].read_bytes()[:5] == b"%PDF-" and paths[1].stat().st_size > 2000


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    f = write_results(root, seeds=(0, 1))
    res = loading.load_results(f["evals"], f["bases"], f["steps"], BENCHMARKS, PASS_K)
    probes, subsets = loading.load_pool(f["probes"], f["subsets"])
    return res, probes, subsets


@pytest.fixture(scope="module")
def reference():
    return load_reference("hard_examples_published")


NAMES = {"models": {"m1": "Qwen3-4B", "m2": "Phi-4"}, "tasks": {"t1": "gsm8k", "t2": "tracking_shuffled_objects"}}


def test_accuracy_curves(data, reference, tmp_path):
    res, _, _ = data
    curves = accuracy_curves(res)
    base = curves.filter(pl.col("strategy") == "base")
    assert (base["step"] == 0).all()
    # every run's curve starts at the base model (step 0)
    first = curves.filter((pl.col("strategy") == "hard") & (pl.col("step") == 0) & (pl.col("benchmark") == "t1/test"))
    assert first.height == 2 * 2  # 2 models x 2 seeds
    plain = P.plot_accuracy_curves(curves, res.benchmarks, [tmp_path / "c.png", tmp_path / "c.pdf"], STYLE)
    _check(plain)
    overlay = P.plot_accuracy_curves(curves, res.benchmarks, [tmp_path / "r.png", tmp_path / "r.pdf"], STYLE,
                                     reference_curves(reference), NAMES)
    _check(overlay)
    assert overlay[0].read_bytes() != plain[0].read_bytes()  # the published curves are drawn


def test_learnable_vs_gain(data, reference, tmp_path):
    res, _, _ = data
    rep = regression_report(run_summary(res), n_boot=100, ref=reference, names=NAMES)
    rep = json.loads(json.dumps(rep))  # as the figure rule reads it: from regression.json
    _check(P.plot_learnable_vs_gain(rep, [tmp_path / "l.png", tmp_path / "l.pdf"], STYLE))
    # the published data alone (paper 1's Figure 3)
    pub = regression_report(reference, n_boot=100)
    _check(P.plot_learnable_vs_gain(pub, [tmp_path / "p.png", tmp_path / "p.pdf"], STYLE))


def test_learnable_vs_gain_without_a_fit(tmp_path):
    flat = pl.DataFrame({"model": ["m"] * 2, "task": ["t"] * 2, "strategy": ["hard", "easy"], "seed": [0, 0],
                         "learnable_pct": [0.0, 0.0], "gain": [0.0, 0.0]})
    rep = json.loads(json.dumps(regression_report(flat, n_boot=50)))
    assert rep["this_run"]["slope"] is None
    _check(P.plot_learnable_vs_gain(rep, [tmp_path / "f.png", tmp_path / "f.pdf"], STYLE), min_px=(200, 150))


def test_learnable_vs_gain_when_every_gain_is_the_same(tmp_path):
    """A run where training moved no answer (every gain 0) has a flat fit and no R²; its figure crashed
    (found by rehearsing experiments/difficulty_limits.yaml)."""
    flat = pl.DataFrame({"model": ["m"] * 3, "task": ["t"] * 3, "strategy": ["hard", "easy", "full"], "seed": [0] * 3,
                         "learnable_pct": [20.0, 50.0, 90.0], "gain": [0.0, 0.0, 0.0]})
    rep = json.loads(json.dumps(regression_report(flat, n_boot=50)))
    assert rep["this_run"]["slope"] == 0.0 and rep["this_run"]["r2"] is None
    _check(P.plot_learnable_vs_gain(rep, [tmp_path / "f.png", tmp_path / "f.pdf"], STYLE), min_px=(200, 150))


def test_pool_pass_rates(data, tmp_path):
    _, probes, subsets = data
    _check(P.plot_pool_pass_rates(probes, subsets, [tmp_path / "h.png", tmp_path / "h.pdf"], STYLE))


def test_zero_std_share(data, tmp_path):
    res, _, _ = data
    _check(P.plot_zero_std(res.steps, [tmp_path / "z.png", tmp_path / "z.pdf"], {**STYLE, "rolling_window": 2}))
    empty = loading.load_steps([])
    _check(P.plot_zero_std(empty, [tmp_path / "e.png", tmp_path / "e.pdf"], STYLE), min_px=(200, 150))


def test_unknown_strategies_get_distinct_colours():
    known = ["hard", "tier_low", "tier_high"]
    colours = {s: P.strategy_color(s, known) for s in known}
    assert len(set(colours.values())) == 3 and colours["hard"] == P.STRATEGY_COLORS["hard"]


def test_capacity_figure(tmp_path, data, monkeypatch):
    real_save = P.save_figure
    """Gain and learnable % of each strategy against model size: one row per task, a line per strategy."""
    res, _, _ = data
    summary = run_summary(res)
    gains, learn = gain_table(res, summary=summary), learnable_table(summary)
    models = sorted(set(gains["model"]))
    assert len(models) >= 2  # the fixture's models stand for two capacities
    capacity = {m: 1.4e6 * (1 + i) for i, m in enumerate(models)}  # sizes within a decade, as the CPU study's
    figures = []
    monkeypatch.setattr(P.drawing, "save_figure",
                        lambda fig, paths, dpi: figures.append(fig) or real_save(fig, paths, dpi))
    paths = P.plot_capacity(gains, learn, capacity, [tmp_path / "capacity.png", tmp_path / "capacity.pdf"], STYLE)
    _check(paths)
    # one named tick per model, and no minor labels: near sizes on a log axis gave overlapping ones
    for ax in figures[0].axes[:2]:
        assert ([t.get_text() for t in ax.get_xticklabels()]
                == [f"{m}\n{P.outcomes._human_count(capacity[m])}" for m in models])
        assert not any(t.get_text() for t in ax.get_xticklabels(minor=True))


def test_model_parameters_come_from_the_build_the_conversion_or_the_config(tmp_path):
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "build_summary.json").write_text(json.dumps({"parameters": 1409280}))
    (tmp_path / "smol").mkdir()
    (tmp_path / "smol" / "source.json").write_text(json.dumps({"parameters": 134515008}))
    made = {"tiny": tmp_path / "tiny", "smol": tmp_path / "smol"}
    assert loading.model_parameters({"tiny": 0.01, "smol": 0.01, "qwen": 4.0}, made) == {
        "tiny": 1409280.0, "smol": 134515008.0, "qwen": 4e9}


def test_strategies_of_equal_cost_are_nudged_apart_and_others_stay():
    """Every strategy that reads the probe costs the same rollouts: without the nudge their markers
    drew on top of each other in gain_vs_compute."""
    xs = P.outcomes._dodge([19200.0, 3200.0, 19200.0, 19250.0, 9642.0])
    assert xs[1] == 3200.0 and xs[4] == 9642.0
    spread = sorted(xs[i] for i in (0, 2, 3))
    assert spread[0] < 19200.0 < spread[2] and all(b / a >= 1.03 for a, b in zip(spread, spread[1:]))


def test_a_control_or_online_run_keeps_its_strategys_colour_and_takes_its_own_line_and_marker():
    from hardex.report.plots import strategy_color, strategy_linestyle, strategy_marker
    from hardex.selection import CONTROLS, RunName

    assert strategy_color("hard_shuffled") == strategy_color("hard") == strategy_color("hard_online")
    # the strategy, its online run and every control: each a line of its own
    runs = ["full", "full_online", *(str(RunName("full", control=c)) for c in CONTROLS)]
    assert len({str(strategy_linestyle(r)) for r in runs}) == len(runs)
    # where a figure draws points (pass@k), each control its own marker too
    assert len({strategy_marker(r) for r in runs if r != "full_online"}) == len(CONTROLS) + 1


def drawn(monkeypatch) -> list:
    """The figures a plot function draws, kept open instead of written."""
    figs = []
    monkeypatch.setattr(P.drawing, "save_figure", lambda fig, paths, st: figs.append(fig) or [])
    return figs


def test_full_run_and_its_controls_are_told_apart_in_the_zero_std_and_pass_at_k_figures(monkeypatch):
    figs = drawn(monkeypatch)
    runs = ["full", "full_random_reward", "full_format"]
    steps = pl.DataFrame({"model": "m", "task": "t", "strategy": [r for r in runs for _ in range(4)],
                          "seed": 0, "step": [s for _ in runs for s in range(1, 5)], "frac_zero_std": 0.5})
    P.plot_zero_std(steps, [], STYLE)
    table = pl.DataFrame({"model": "m", "task": "t", "strategy": ["base", *runs], "pass@1": [10.0, 20, 21, 22],
                          "pass@2": [15.0, 25, 26, 27]})
    P.plot_pass_at_k(table, [], STYLE)
    for fig in figs:
        lines = [line for line in fig.axes[0].lines
                 if line.get_label() in runs or line.get_label().split(" ")[0] in runs]
        assert len(lines) == 3 and len({(str(line.get_linestyle()), line.get_marker()) for line in lines}) == 3


def test_accuracy_with_two_checkpoints_is_drawn_as_points_and_with_more_as_curves(monkeypatch):
    figs = drawn(monkeypatch)
    for steps in ([0, 8], [0, 4, 8]):
        curves = pl.DataFrame({"model": "m", "task": "t", "benchmark": "t/test", "strategy": "hard", "seed": 0,
                               "step": steps, "accuracy": [0.2 + 0.01 * s for s in steps]})
        curves = pl.concat([curves, curves.head(1).with_columns(strategy=pl.lit("base"))])
        P.plot_accuracy_curves(curves, {"t": ["t/test"]}, [], STYLE)
    (two,), (three,) = ([ln for ln in f.axes[0].lines if ln.get_label() == "hard"] for f in figs)
    assert two.get_linestyle() == "None" and two.get_marker() == "o"
    assert three.get_linestyle() == "-"


def test_the_regressions_title_says_predicts_only_where_the_slopes_interval_excludes_zero():
    fit = {"n": 4, "slope": 0.5, "r2": 0.9, "slope_ci": [0.1, 0.9]}
    assert P.regression_title(fit, 95).startswith("Learnable % predicts the gain (95 % interval): R² 0.90, slope 0.50")
    weak = P.regression_title({**fit, "r2": 0.11, "slope_ci": [-0.4, 0.9]}, 95)
    assert "predicts" not in weak and "R² 0.11" in weak and "no slope shown" in weak
    assert "predicts" not in P.regression_title({**fit, "slope_ci": [None, None]}, 95)
    assert "no fit" in P.regression_title({"n": 2, "slope": None}, 95)


def test_one_call_draws_every_figure_its_paths_name(tmp_path):
    """The report's figure job: every figure from the figure rules' inputs and params in one process, each
    into the paths of its name (one file per format); a name no figure has is refused."""
    from hardex.report import AnalysisError, figures, sharpening
    from tests.support import BASE_ACC

    f = write_results(tmp_path, seeds=(0, 1))
    res = loading.load_results(f["evals"], f["bases"], f["steps"], BENCHMARKS, PASS_K)
    probes, _ = loading.load_pool(f["probes"], f["subsets"])
    summary = run_summary(res)
    (tmp_path / "regression.json").write_text(json.dumps(regression_report(summary, n_boot=50)))
    counted = res.steps.with_columns(rollouts_generated=pl.lit(32), rollouts_discarded=pl.lit(0),
                                     tokens_generated=pl.lit(320), filter_capped=pl.lit(False))
    budget = rollout_budget(gain_table(res, n_boot=50, summary=summary), counted, probes)
    budget.write_csv(tmp_path / "rollout_budget.csv")
    sharpening.pass_at_k_table(res, n_boot=50).write_csv(tmp_path / "pass_at_k.csv")
    probes, subsets = loading.load_pool(f["probes"], f["subsets"])
    built = tables.build_tables(res, probes, subsets, n_boot=50)
    built["headline"][0].write_csv(tmp_path / "headline.csv")
    built["gain_curve"][0].write_csv(tmp_path / "gain_curve.csv")
    built["gain_by_difficulty"][0].write_csv(tmp_path / "gain_by_difficulty.csv")
    inputs = {**f, "models": [], "regression": tmp_path / "regression.json", "budget": tmp_path / "rollout_budget.csv",
              "pass_at_k": tmp_path / "pass_at_k.csv", "headline": tmp_path / "headline.csv",
              "gain_curve": tmp_path / "gain_curve.csv", "by_difficulty": tmp_path / "gain_by_difficulty.csv"}
    params = {"benchmarks": BENCHMARKS, "pass_k": PASS_K, "stats": {"ci_level": 0.95, "iterations": 50, "seed": 0},
              "style": STYLE, "reference": "hard_examples_published", "names": NAMES,
              "generations": {m: 4 for m in BASE_ACC}, "sizes_b": {m: 1.0 + i for i, m in enumerate(BASE_ACC)},
              "built": {}}
    paths = [tmp_path / "figures" / f"{name}.{ext}" for name in figures.FIGURES for ext in ("png", "pdf")]
    logged = []
    written = figures.draw_figures(paths, inputs, params, logged.append)
    assert list(written) == list(figures.FIGURES) and len(logged) == len(figures.FIGURES)
    for name, files in written.items():
        assert [p.stem for p in files] == [name, name]
        _check(files, min_px=(200, 150))
    with pytest.raises(AnalysisError, match="no figure named nope"):
        figures.draw_figures([tmp_path / "nope.png"], inputs, params)


def test_training_dynamics_marks_the_probes_predicted_mixed_share_at_step_0_and_draws_truncation(monkeypatch):
    figs = drawn(monkeypatch)
    steps = pl.DataFrame({"model": "m", "task": "t", "strategy": [s for s in ("hard", "full") for _ in range(3)],
                          "seed": 0, "step": [1, 2, 3] * 2, "reward_mean": 0.5, "frac_zero_std": 0.4,
                          "completion_length": 20.0, "frac_truncated": [0.1, 0.2, 0.3] * 2, "kl": 0.0})
    predicted = pl.DataFrame({"model": "m", "task": "t", "strategy": ["pool", "hard", "full"],
                              "expected_learnable_pct_posterior": [30.0, 12.0, 30.0]})
    P.plot_training_dynamics(dynamics_by_step(steps), [], STYLE, predicted)
    (fig,) = figs
    titles = [ax.get_title() for ax in fig.axes]
    assert any("cut at the length limit" in t for t in titles) and not any("KL" in t for t in titles)
    mixed = next(ax for ax in fig.axes if "mixed rewards" in ax.get_title())
    marks = {(tuple(line.get_xdata()), tuple(line.get_ydata())) for line in mixed.lines if line.get_marker() == "D"}
    assert marks == {((0,), (12.0,)), ((0,), (30.0,))}  # hard's and full's, not the pool's
    # runs recorded before truncation was: no panel for it
    P.plot_training_dynamics(dynamics_by_step(steps.with_columns(frac_truncated=pl.lit(None, dtype=pl.Float64))), [],
                             STYLE)
    assert not any("cut at" in ax.get_title() for ax in figs[1].axes)
