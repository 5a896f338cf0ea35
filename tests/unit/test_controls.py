"""Control runs (hardex.controls): the shuffled answers, the format and random rewards, their config and run
names, Table 1's gain beyond them, and shuffled and random-reward runs through TRL's GRPOTrainer."""

from __future__ import annotations

import copy
import itertools
import random

import numpy as np
import polars as pl
import pytest

from hardex.config import ConfigError, check_config
from hardex.controls import (
    RandomReward,
    control_notices,
    derangement,
    format_reward,
    format_score,
    reads_an_answer,
    reward_line,
    run_reward,
    shuffled_rows,
)
from hardex.report import loading
from hardex.report.beyond_controls import beyond_controls_note, gain_beyond_controls
from hardex.report.gains import gain_table
from hardex.report.runs import run_summary
from hardex.selection import CONTROLS, RunName, strategy_sort_key
from hardex.settings import run_strategies
from hardex.tasks import get_task

# ---- the derangement -------------------------------------------------------------------------------

def fewest_possible_kept(answers) -> int:
    """The least number of examples that must keep an equal answer, by brute force over permutations."""
    n = len(answers)
    return min(sum(answers[i] == answers[p[i]] for i in range(n)) for p in itertools.permutations(range(n)))


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_no_example_keeps_its_answer_while_no_answer_holds_more_than_half(seed):
    rng = random.Random(seed)
    for _ in range(200):
        n = rng.randint(2, 30)
        answers = [str(rng.randint(0, rng.randint(1, 6))) for _ in range(n)]
        p = derangement(answers, seed)
        assert sorted(p) == list(range(n))  # a permutation: the subset's answers, each used once
        kept = sum(answers[i] == answers[p[i]] for i in range(n))
        largest = max(answers.count(a) for a in answers)
        assert kept == max(0, 2 * largest - n), (answers, p)  # none when possible, else the unavoidable


def test_the_derangement_keeps_as_few_as_any_permutation_can():
    for answers in (["1", "1", "1", "2"], ["a", "b"], ["x", "x", "y", "y", "z"], ["5"] * 4 + ["6", "7"], ["3"]):
        p = derangement(answers, 3)
        assert sum(answers[i] == answers[p[i]] for i in range(len(answers))) == fewest_possible_kept(answers)


def test_the_derangement_is_fixed_by_answers_and_seed_and_changes_with_the_seed():
    answers = [str(i % 7) for i in range(40)]
    assert derangement(answers, 5) == derangement(list(answers), 5)
    assert derangement(answers, 5) != derangement(answers, 6)
    # the groups are ordered by value, not by set order (PYTHONHASHSEED): a fresh process gets the same
    import subprocess
    import sys
    code = f"from hardex.controls import derangement; print(derangement({answers!r}, 5))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": str(h)}).stdout for h in (1, 2)}
    assert outs == {f"{derangement(answers, 5)}\n"}


def test_shuffled_rows_keep_prompts_and_the_answers_multiset_and_say_what_they_could_not_avoid():
    rows = [{"prompt": f"q{i}", "answer": a} for i, a in enumerate(["1", "2", "3", "4"])]
    out, note = shuffled_rows(rows, 0)
    assert [r["prompt"] for r in out] == [r["prompt"] for r in rows]
    assert sorted(r["answer"] for r in out) == ["1", "2", "3", "4"]
    assert all(o["answer"] != r["answer"] for o, r in zip(out, rows))
    assert note == "no example of 4 is scored against an equal answer"
    assert rows[0]["answer"] == "1"  # the subset's own rows are not changed

    same, note = shuffled_rows([{"prompt": f"q{i}", "answer": "7"} for i in range(3)], 0)
    assert [r["answer"] for r in same] == ["7"] * 3
    assert "all 3 examples have the same reference answer ('7'" in note and "measures nothing" in note

    _, note = shuffled_rows([{"prompt": f"q{i}", "answer": a} for i, a in enumerate("aaab")], 0)
    assert note.startswith("2 of 4 examples keep an equal reference: 'a' is the answer of 3")


# ---- the format reward -----------------------------------------------------------------------------

def test_the_format_reward_pays_for_any_answer_the_boxed_scorer_reads():
    for family in ("addition", "arith"):
        task = get_task(family, "lenient")
        reward = format_reward(task, 2.0)
        assert reward("so \\boxed{12}", "12", None) == 2.0
        assert reward("so \\boxed{99}", "12", None) == 2.0  # wrong, still an answer
        assert reward("so \\boxed{}", "12", None) == 0.0  # an empty box says nothing
        assert reward("the answer is 12", "12", None) == 0.0  # lenient scoring reads only boxes
        assert reward("\\boxed{12", "12", None) == 0.0  # an unclosed box is no answer
        prompt = task.prompt({"question": "What is 3 + 4?"})
        assert reward(prompt, "7", prompt) == 0.0  # an echoed instruction's box is not the model's


def test_the_format_reward_follows_flexible_scoring():
    for family in ("addition", "arith"):
        task = get_task(family, "flexible")
        reward = format_reward(task)
        # read by its last number, which ends the completion; not boxed: three quarters
        assert reward("so 8 + 6 = 14, the answer is 14.", "12", None) == 0.75
        assert reward("so \\boxed{}, i.e. 5", "12", None) == 0.75
        assert reward("no number here", "12", None) == 0.0
        assert reads_an_answer(task, "\\boxed{x}", "12") and not reads_an_answer(task, "", "12")


def test_the_format_reward_of_strict_scoring_reads_the_released_box():
    task = get_task("gsm8k", "strict")
    assert reads_an_answer(task, "\\boxed{18.0}", "18")  # no answer to the released int(), but an answer's form
    assert not reads_an_answer(task, "18", "18")


def test_the_format_score_grades_where_and_how_the_answer_is_written_and_never_its_value():
    task = get_task("addition", "flexible")
    forms = {
        "\\boxed{85}": 1.0,  # read, boxed, ends the completion
        "47 + 38 = 85, so the answer is \\boxed{85}.": 1.0,
        "The answer is \\boxed{85}.\nI hope this helps!": 0.75,  # boxed, but the completion goes on
        "47 + 38 = 85. So the final answer is 85.": 0.75,  # ends with it, not boxed
        "The answer is 85 and I added the tens first": 0.5,  # read by its last number only
        "I am not sure how to add these": 0.0,
    }
    for completion, score in forms.items():
        for reference in ("85", "12"):  # the right answer pays no more than a wrong one
            assert format_score(task, completion, reference) == pytest.approx(score), completion
    # a group of the base model's usual answers mixes: the reward has a gradient to give
    assert len({format_score(task, c, "85") for c in forms}) == 4
    # and a group whose forms agree has a standard deviation of exactly 0 in float32, as TRL computes it
    # (in thirds, eight 2/3's gave 6e-8, which TRL's isclose counts as a mixed group)
    import torch

    for score in set(forms.values()):
        assert torch.tensor([score] * 8, dtype=torch.float32).std().item() == 0.0


def test_the_random_reward_pays_at_the_true_rate_whatever_the_completions_say():
    task = get_task("addition", "lenient")
    reward = run_reward("random_reward", task, 2.0, seed=3)
    assert isinstance(reward, RandomReward)
    rng = np.random.default_rng(0)
    right = rng.random(4000) < 0.3
    completions = [f"try {i}: \\boxed{{{12 if r else 13}}}" for i, r in enumerate(right)]
    paid = np.array(reward.batch(completions, ["12"] * len(right), ["q"] * len(right)))
    assert set(paid) <= {0.0, 2.0}
    assert paid.mean() / 2 == pytest.approx(right.mean(), abs=0.03)  # the true reward's rate...
    assert (paid[right] > 0).mean() == pytest.approx((paid[~right] > 0).mean(), abs=0.05)  # ...blind to rightness
    again = reward.batch(completions, ["12"] * len(right), ["q"] * len(right))
    assert again == paid.tolist()  # the same batch draws alike (a resumed run, another process)
    other = run_reward("random_reward", task, 2.0, seed=4).batch(completions, ["12"] * 4000, ["q"] * 4000)
    assert other != paid.tolist()
    assert reward.batch(["\\boxed{13}"] * 8, ["12"] * 8, ["q"] * 8) == [0.0] * 8  # rate 0: nothing paid
    assert reward.batch(["\\boxed{12}"] * 8, ["12"] * 8, ["q"] * 8) == [2.0] * 8  # rate 1: all paid
    # groups of 8 at the rate 0.3 mix about 1 - 0.3^8 - 0.7^8 = 94 % of the time
    groups = (paid.reshape(-1, 8) > 0).mean(axis=1)
    assert ((groups > 0) & (groups < 1)).mean() == pytest.approx(1 - 0.3**8 - 0.7**8, abs=0.04)


def test_a_shuffled_control_on_a_choice_task_is_said_at_planning(smoke_config):
    cfg = check_config(copy.deepcopy(smoke_config))
    choice = [t for t, tc in cfg["tasks"].items()
              if get_task(cfg["datasets"][tc["pool"].split("/")[0]]["family"]).answer_kind == "choice"]
    cfg["selection"]["controls"] = {"format": ["full"]}
    assert control_notices(cfg) == []
    cfg["selection"]["controls"] = {"shuffled": ["full"]}
    lines = control_notices(cfg)
    assert choice and [line.split(":")[0] for line in lines] == choice
    assert "never the right one" in lines[0] and "random_reward" in lines[0]


def test_run_reward_picks_the_control_and_keeps_the_true_reward_otherwise():
    task = get_task("addition", "lenient")
    for control in (None, "shuffled"):
        reward = run_reward(control, task, 1.0)
        assert reward("\\boxed{12}", "12", None) == 1.0 and reward("\\boxed{13}", "12", None) == 0.0
    assert run_reward("format", task, 1.0)("\\boxed{13}", "12", None) == 1.0
    with pytest.raises(ValueError, match="unknown control 'spurious'"):
        run_reward("spurious", task, 1.0)


# ---- names and config ------------------------------------------------------------------------------

def test_run_names_parse_into_subset_online_and_control_and_are_written_back():
    named = {
        "full_shuffled": RunName("full", control="shuffled"),  # trains on full's subset
        "hard_format": RunName("hard", control="format"),
        "hard_online": RunName("hard", online=True),
        "tier_low_random_format": RunName("tier_low_random", control="format"),
        "tier_format": RunName("tier_format"),  # a tier named format
        "tier_format_format": RunName("tier_format", control="format"),
        "tier_online": RunName("tier_online"),  # a tier named online
        "tier_online_online": RunName("tier_online", online=True),
        "full_random_reward": RunName("full", control="random_reward"),
        "tier_low_random": RunName("tier_low_random"),  # a tier's random draw
        "tier_low_random_reward": RunName("tier_low", control="random_reward"),
        "hard": RunName("hard"),
    }
    for name, run in named.items():
        assert RunName.parse(name) == run and str(run) == name
    order = sorted(["full_format", "hard_shuffled", "full", "hard_online", "hard", "full_shuffled", "hard_format"],
                   key=strategy_sort_key)
    assert order == ["hard", "hard_online", "hard_shuffled", "hard_format", "full", "full_shuffled", "full_format"]


@pytest.mark.parametrize("online,control", [(True, "format"), (False, "spurious")])
def test_a_run_name_of_no_run_is_refused(online, control):
    with pytest.raises(ValueError, match="no run 'hard'"):
        RunName("hard", online=online, control=control)


def test_every_control_pays_by_its_own_rule_and_has_its_log_line():
    """Each control's defining behaviour (a control that always paid 0 passed the former test): shuffled pays the
    true reward against the reference it is handed (its rows hold another example's), format pays the form of a
    right and a wrong boxed answer alike and less for none, random_reward pays 0 or the scale at the batch's true
    rate, whatever each completion says."""
    task = get_task("addition", "lenient")
    right, wrong, none = "so \\boxed{12}", "so \\boxed{13}", "no idea"
    shuffled = run_reward("shuffled", task, 2.0)
    assert (shuffled(right, "12", None), shuffled(wrong, "12", None), shuffled(right, "13", None)) == (2.0, 0.0, 0.0)
    fmt = run_reward("format", task, 2.0)
    assert fmt(right, "12", None) == fmt(wrong, "12", None) == 2.0 and fmt(none, "12", None) == 0.0
    rand = run_reward("random_reward", task, 2.0, seed=3)
    completions = [right] * 30 + [wrong] * 30  # half right: paid at rate one half, not by correctness
    paid = rand.batch(completions, ["12"] * 60, ["p"] * 60)
    assert set(paid) == {0.0, 2.0} and 15 <= paid.count(2.0) <= 45
    assert paid[:30] != [2.0] * 30 and paid[30:] != [0.0] * 30
    assert set(CONTROLS) == {"shuffled", "format", "random_reward"}  # each one tested above
    for control in CONTROLS:
        assert reward_line(control, 1.0).startswith("reward: ")


def test_controls_become_runs_of_their_strategies_subsets(smoke_config):
    cfg = copy.deepcopy(smoke_config)
    cfg["selection"]["controls"] = {"shuffled": ["hard", "random"], "format": ["hard"]}
    cfg["selection"]["allow_unlearnable"] = ["hard_format"]
    cfg = check_config(cfg)
    assert run_strategies(cfg) == ["hard", "easy", "random", "hard_online", "hard_format", "hard_shuffled",
                                   "random_shuffled"]
    without = copy.deepcopy(smoke_config)
    without["selection"].pop("controls")
    assert check_config(without)["selection"]["controls"] == {}  # the default: no control runs


@pytest.mark.parametrize("controls,message", [
    ({"spurious": ["hard"]}, "selection.controls.spurious: unknown control; known: shuffled, format, random_reward"),
    ({"shuffled": ["hard", "full"]}, "selection.controls.shuffled.1: 'full' is not one of selection.strategies"),
    ({"format": ["hard_online"]}, "selection.controls.format.0: 'hard_online': controls of online-filtering runs"),
])
def test_controls_of_unknown_names_or_unselected_strategies_are_refused(smoke_config, controls, message):
    cfg = copy.deepcopy(smoke_config)
    cfg["selection"]["controls"] = controls
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        check_config(cfg)


# ---- Table 1: the gain beyond the controls ---------------------------------------------------------

N_TEST = 10


def outcomes(strategy, seed, step, n_right):
    return [{"model": "m", "task": "t", "strategy": strategy, "seed": seed, "step": step, "benchmark": "t/test",
             "id": f"q{i}", "tier": "1", "n": 1, "n_correct": int(i < n_right)} for i in range(N_TEST)]


def results(final: dict[tuple[str, int], int]) -> loading.Results:
    """Base: 5 of 10 right for every seed; each run (strategy, seed) ends with `final` of 10 right."""
    runs = pl.DataFrame([r for (s, seed), right in final.items() for r in outcomes(s, seed, 4, right)])
    seeds = sorted({seed for _, seed in final})
    base = pl.DataFrame([r for seed in seeds for r in outcomes("base", seed, 0, 5)]).drop("strategy", "step")
    return loading.Results(runs, base, loading.load_steps([]), {"t": ["t/test"]})


def test_gain_beyond_a_control_is_paired_by_seed_with_a_t_interval():
    res = results({("hard", 0): 8, ("hard", 1): 9, ("hard_format", 0): 6, ("hard_format", 1): 6,
                   ("hard_format", 2): 9, ("random", 0): 7, ("random", 1): 7})
    summary = run_summary(res)
    gains = gain_table(res, summary=summary, n_boot=50)
    out = gain_beyond_controls(gains, summary, res, n_boot=50)
    assert "beyond_shuffled" not in out.columns  # no shuffled control ran
    assert out["strategy"].to_list() == ["hard", "hard_format", "random"]  # control runs are rows too
    hard = out.row(0, named=True)
    assert hard["beyond_format"] == pytest.approx(25.0)  # gains 30, 40 against 10, 10 (seed 2 has no pair)
    from hardex.statistics import t_interval
    assert (hard["beyond_format_ci_low"], hard["beyond_format_ci_high"]) == pytest.approx(t_interval([20.0, 30.0]))
    for row in out.rows(named=True)[1:]:  # the control's own row, and a strategy whose control did not run
        assert row["beyond_format"] is None and row["beyond_format_ci_low"] is None
    assert "beyond_format" in beyond_controls_note(out, "95 %")
    assert beyond_controls_note(gains, "95 %") == ""
    assert gain_beyond_controls(gain_table(res.__class__(
        res.runs.filter(~pl.col("strategy").str.ends_with("_format")), res.base, res.steps, res.benchmarks),
        n_boot=10), summary.filter(~pl.col("strategy").str.ends_with("_format")), res).columns == gains.columns


def test_gain_beyond_a_control_with_one_seed_is_bootstrapped_over_test_questions():
    res = results({("full", 0): 8, ("full_shuffled", 0): 6, ("full_format", 0): 8})
    summary = run_summary(res)
    out = gain_beyond_controls(gain_table(res, summary=summary, n_boot=50), summary, res, n_boot=500)
    full = out.row(0, named=True)
    assert full["beyond_shuffled"] == pytest.approx(20.0) and full["beyond_format"] == pytest.approx(0.0)
    assert full["beyond_shuffled_ci_low"] <= 20.0 <= full["beyond_shuffled_ci_high"]
    assert full["beyond_shuffled_ci_low"] >= 0  # questions 6 and 7 right only in the full run: no resample < 0
    assert full["beyond_format_ci_low"] == full["beyond_format_ci_high"] == 0.0  # the same outcomes
    assert not np.isnan(full["beyond_shuffled_ci_high"])


# ---- a shuffled run through TRL ----------------------------------------------------------------------

def two_step_run(tiny_model, smoke_config):
    """GRPO settings for two steps of 4 prompts x 8 completions, arith's flexible task (it reads the digits
    the tiny model writes now and then: some rewards are 1) and 8 of its rendered rows."""
    from hardex.job import renderer

    g = check_config(copy.deepcopy(smoke_config))["grpo"]
    g.update(max_steps=2, save_steps=2, num_generations=8, prompts_per_step=4, max_completion_length=16)
    task = get_task("arith", "flexible")
    pool = task.load_split({"name": "pool", "n": 8, "seed": 1, "difficulty": [1, 1]})
    render = renderer(str(tiny_model), False)
    return g, task, [{"prompt": render(task.prompt(r)), "answer": r["answer"]} for r in pool.to_dicts()]


def test_a_shuffled_control_trains_with_trl_on_the_shuffled_references(tmp_path, tiny_model, smoke_config):
    """Two GRPO steps on arith examples: every reward is scored against the row's shuffled reference, never
    the example's own, the steps record the mean of those rewards, and a rerun keeps the mapping (it
    resumes the run's checkpoints instead of starting afresh)."""
    from hardex.training import train_grpo

    g, task, rows = two_step_run(tiny_model, smoke_config)
    shuffled, _ = shuffled_rows(rows, 0)
    own = {r["prompt"]: r["answer"] for r in rows}
    reference = {r["prompt"]: r["answer"] for r in shuffled}
    assert len(set(own.values())) > 1 and all(reference[p] != own[p] for p in own)

    calls = []
    true_reward = run_reward("shuffled", task, 1.0)  # the task's scorer, against the references of the rows

    def recorded(completion, answer, prompt):
        value = true_reward(completion, answer, prompt)
        calls.append((completion, answer, prompt, value))
        return value

    def train(log):
        run_dir = tmp_path / "run"
        rows_again, _ = shuffled_rows(rows, 0)  # as a second job (or a worker process) derives them
        train_grpo(str(tiny_model), rows_again, recorded, g, 0, run_dir, run_dir / "final", run_dir / "steps.parquet",
                   identity={"control": "shuffled"}, log=log)
        return pl.read_parquet(run_dir / "steps.parquet")

    steps = train(lambda *a: None)
    per_step = g["prompts_per_step"] * g["num_generations"]
    assert steps["step"].to_list() == [1, 2] and len(calls) == 2 * per_step
    assert all(answer == reference[prompt] != own[prompt] for _, answer, prompt, _ in calls)
    for step in range(2):
        chunk = calls[step * per_step:(step + 1) * per_step]
        assert steps["reward_mean"][step] == pytest.approx(sum(c[3] for c in chunk) / per_step)
        # the rewards are the scorer's against the shuffled references, not against the examples' own
        assert [c[3] for c in chunk] == [float(task.is_correct(c[0], reference[c[2]], c[2])) for c in chunk]
    # ... which differ from the true reward's: the test can tell the two apart
    assert any(c[3] != float(task.is_correct(c[0], own[c[2]], c[2])) for c in calls)

    messages = []
    train(messages.append)
    assert not any("starting afresh" in str(m) for m in messages), messages
    assert any("is the run's last step: publishing it" in str(m) for m in messages), messages


def test_a_random_reward_control_trains_with_trl_on_whole_steps_of_random_rewards(tmp_path, tiny_model, smoke_config):
    """Two GRPO steps: TRL hands the random reward each step's completions at once (so its rate is the step's
    true rate), the steps record the mean of what it paid, and its groups mix where the true reward's
    agree."""
    from hardex.training import train_grpo

    g, _, rows = two_step_run(tiny_model, smoke_config)
    batches = []

    class Recorded(RandomReward):
        def batch(self, completions, answers, prompts):
            paid = super().batch(completions, answers, prompts)
            true = [self.true_reward(c, a, p) for c, a, p in zip(completions, answers, prompts)]
            batches.append((true, paid))
            return paid

    # a true reward that pays one completion in four, by its text: a rate the random reward must match
    def quarter(completion, answer, prompt):
        return float(len(completion) % 4 == 0)

    run_dir = tmp_path / "run"
    train_grpo(str(tiny_model), rows, Recorded(quarter, 1.0, 0), g, 0, run_dir, run_dir / "final",
               run_dir / "steps.parquet", identity={"control": "random_reward"}, log=lambda *a: None)
    steps = pl.read_parquet(run_dir / "steps.parquet")
    per_step = g["prompts_per_step"] * g["num_generations"]
    assert [len(paid) for _, paid in batches] == [per_step, per_step]  # a whole step at once
    assert steps["reward_mean"].to_list() == pytest.approx([float(np.mean(paid)) for _, paid in batches])
    assert any(t != p for true, paid in batches for t, p in zip(true, paid))  # not the true reward
