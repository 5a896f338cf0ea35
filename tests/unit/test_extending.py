"""A new control added as docs/architecture.md's "Extending hardex" says, and only so: one `Control` record in
hardex.controls.REGISTRY (put there by monkeypatch, which takes it out again after each test). Planning accepts and
names its runs, a train job trains with its reward through TRL on a real batch and logs its line, and the report
draws its runs in its line and marker and reads a strategy against it."""

from __future__ import annotations

import copy

import polars as pl
import pytest

from hardex.config import ConfigError, check_config
from hardex.controls import REGISTRY, Control, RewardSpec, control_rows, reward_line
from hardex.report import loading
from hardex.report.beyond_controls import gain_beyond_controls
from hardex.report.gains import gain_table
from hardex.report.headline import pick_control
from hardex.report.runs import run_summary
from hardex.selection import RunName, strategy_sort_key
from hardex.settings import run_grpo_settings, run_strategies
from hardex.tasks import get_task

#: pays half the reward scale for any completion: never the true reward, so its groups never mix
TOY = Control(
    "toy",
    reward=lambda task, scale, seed, true_reward: (lambda completion, answer, prompt: 0.5 * scale),
    line=lambda words: f"reward: toy control, {0.5 * words.scale:g} for every completion",
    linestyle=(0, (1, 4)), marker="P", preference=-1, calls_true_reward=False,
)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(REGISTRY, "toy", TOY)
    return TOY


def with_toy_runs(smoke_config, **tasks) -> dict:
    cfg = copy.deepcopy(smoke_config)
    cfg["selection"]["controls"] = {"toy": ["hard"]}
    cfg["selection"]["allow_unlearnable"] = ["hard_toy"]
    for key, value in tasks.items():
        cfg["tasks"]["swaps"][key] = value
    return cfg


def test_without_its_record_a_control_is_unknown(smoke_config):
    with pytest.raises(ConfigError, match="selection.controls.toy: unknown control"):
        check_config(with_toy_runs(smoke_config))
    assert RunName.parse("hard_toy") == RunName("hard_toy")  # a strategy name, not a control run


def test_planning_accepts_the_new_control_and_names_its_runs(toy, smoke_config, tmp_path):
    hook = tmp_path / "hook.py"
    hook.write_text("def reward(completion, answer, prompt):\n    return 1.0\n")
    cfg = check_config(with_toy_runs(smoke_config, reward=f"{hook}:reward"))
    assert run_strategies(cfg)[-1] == "hard_toy" and RunName.parse("hard_toy") == RunName("hard", control="toy")
    # shown after hard's other runs, before easy's
    assert sorted(["easy", "hard_toy", "hard_format", "hard"], key=strategy_sort_key) == \
        ["hard", "hard_format", "hard_toy", "easy"]
    # it never calls the true reward: its runs are not keyed by the task's reward hook, which hard's are
    assert "reward_hook" in run_grpo_settings(cfg, "tiny", "hard", "swaps")
    assert "reward_hook" not in run_grpo_settings(cfg, "tiny", "hard_toy", "swaps")


def test_a_train_job_trains_with_the_new_controls_reward_and_logs_its_line(toy, tmp_path, tiny_model, smoke_config):
    """What scripts/train.py does for a run hard_toy, on arith rows the tiny model renders: two GRPO steps through
    TRL, each completion paid the toy's 0.5, so every group agrees (the steps' reward mean 0.5, no mixed group)."""
    from hardex.job import renderer
    from hardex.training import train_grpo

    g = check_config(copy.deepcopy(smoke_config))["grpo"]
    g.update(max_steps=2, save_steps=2, num_generations=4, prompts_per_step=2, max_completion_length=8)
    task = get_task("arith", "flexible")
    render = renderer(str(tiny_model), False)
    pool = task.load_split({"name": "pool", "n": 4, "seed": 1, "difficulty": [1, 1]})
    subset = [{"prompt": render(task.prompt(r)), "answer": r["answer"]} for r in pool.to_dicts()]

    control = RunName.parse("hard_toy").control
    rows, note = control_rows(control, subset, 0)
    assert control == "toy" and rows == subset and note == ""
    line = reward_line(control, g["reward_scale"])
    assert line == f"reward: toy control, {0.5 * g['reward_scale']:g} for every completion"
    spec = RewardSpec("arith", "flexible", g["reward_scale"], control, None)
    assert spec.function(0)("anything", "7", "What is 3 + 4?") == 0.5 * g["reward_scale"]
    run_dir = tmp_path / "run"
    train_grpo(str(tiny_model), rows, spec, g, 0, run_dir, run_dir / "final", run_dir / "steps.parquet",
               identity={"control": control, "reward": line}, log=lambda *a: None)
    steps = pl.read_parquet(run_dir / "steps.parquet")
    assert steps["step"].to_list() == [1, 2]
    assert steps["reward_mean"].to_list() == pytest.approx([0.5 * g["reward_scale"]] * 2)
    assert steps["frac_zero_std"].to_list() == [1.0, 1.0]


def outcomes(strategy, seed, n_right, n=10):
    return [{"model": "m", "task": "t", "strategy": strategy, "seed": seed, "step": 4, "benchmark": "t/test",
             "id": f"q{i}", "tier": "1", "n": 1, "n_correct": int(i < n_right)} for i in range(n)]


def test_the_report_draws_the_new_controls_runs_and_reads_strategies_against_it(toy, monkeypatch):
    from hardex.report import plots

    # Table 1's beyond_toy: hard's gain minus hard_toy's, paired by seed (base 5 of 10 right)
    final = {("hard", 0): 8, ("hard", 1): 9, ("hard_toy", 0): 6, ("hard_toy", 1): 6}
    runs = pl.DataFrame([r for (s, seed), right in final.items() for r in outcomes(s, seed, right)])
    base = pl.DataFrame([r for seed in (0, 1) for r in outcomes("base", seed, 5)]).drop("strategy", "step")
    res = loading.Results(runs, base, loading.load_steps([]), {"t": ["t/test"]})
    summary = run_summary(res)
    hard = gain_beyond_controls(gain_table(res, summary=summary, n_boot=50), summary, res, n_boot=50).row(0, named=True)
    assert hard["strategy"] == "hard" and hard["beyond_toy"] == pytest.approx(25.0)
    # the headline reads a strategy against it on a tie with format: its preference, -1, comes first
    assert pick_control({"beyond_format": 2.0, "beyond_toy": 2.0}) == "toy"

    # the figures: its runs in their strategy's colour, in the toy's marker and its own dashed line
    figures = []
    monkeypatch.setattr(plots.drawing, "save_figure", lambda fig, paths, st: figures.append(fig) or [])
    curve = pl.DataFrame({"model": "m", "task": "t", "metric": "sampled", "step": [2, 4, 2, 4],
                          "strategy": ["hard", "hard", "hard_toy", "hard_toy"], "gain": [1.0, 2.0, 0.5, 0.5],
                          "gain_ci_low": None, "gain_ci_high": None})
    plots.plot_gain_curve(curve, [], {"dpi": 40})
    lines = {line.get_label(): line for line in figures[0].axes[0].get_lines()}
    assert lines["hard_toy"].get_marker() == "P" and lines["hard"].get_marker() == "o"
    assert lines["hard_toy"].get_linestyle() == "--" and lines["hard"].get_linestyle() == "-"  # "--": any dashes
    assert plots.strategy_linestyle("hard_toy") == (0, (1, 4))
    assert lines["hard_toy"].get_color() == lines["hard"].get_color()
