"""A task's prompt (tasks.<task>.system_prompt, prompt_template) and reward hook (tasks.<task>.reward) through
Snakemake's own CLI: refused at planning naming the key, planned where good, and rerunning exactly what they
change in a finished run (the jobs that train with a hook run it, and an edit of its file trains again)."""

from __future__ import annotations

import json

import yaml

from hardex.reward_hook import trial_calls
from tests.support import snakemake, write_config
from tests.workflow.test_staleness import downstream, job, planned, runs  # noqa: F401 (downstream: a fixture, F811 where a test takes it)

HOOK = '''import json


def reward(completion, answer, prompt):
    """Pays completions that name Bob; writes each call beside itself."""
    value = 1.0 if "Bob" in completion else 0.0
    with open(__file__ + ".calls", "a") as fh:
        fh.write(json.dumps({"answer": answer, "reward": value}) + "\\n")
    return value
'''
RUNS_WITH_HOOK = ("hard", "easy", "random", "hard_online", "hard_random_reward")  # not hard_format: it pays form


def with_task_keys(cfg: dict, **keys) -> dict:
    cfg["tasks"]["swaps"].update(keys)
    return cfg


def refusal(tmp_path, cfg) -> str:
    res = snakemake(tmp_path, "-n", "--cores", "1", configfile=write_config(tmp_path, cfg))
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "Traceback" not in out
    assert not (tmp_path / "results").exists()
    lines = [line for line in out.splitlines() if line.startswith("hardex: config error:")]
    assert len(lines) == 1, out[-3000:]
    return lines[0]


def test_a_bad_hook_or_template_is_refused_naming_the_key_and_a_good_one_plans(tmp_path, smoke_config):
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "two.py").write_text("def reward(completion, answer):\n    return 1.0\n")
    (tmp_path / "hooks" / "bob.py").write_text(HOOK)
    assert refusal(tmp_path, with_task_keys(smoke_config, reward=f"{tmp_path}/hooks/two.py:reward")).startswith(
        f"hardex: config error: tasks.swaps.reward: {tmp_path}/hooks/two.py:reward: cannot be called as "
        f"reward(completion, answer, prompt)")
    assert refusal(tmp_path, with_task_keys(smoke_config, reward="hardex_no_such_hooks:reward")).startswith(
        "hardex: config error: tasks.swaps.reward: hardex_no_such_hooks:reward: no module named")
    assert refusal(tmp_path, with_task_keys(smoke_config, reward=f"{tmp_path}/hooks/bob.py:rewrd")).startswith(
        f"hardex: config error: tasks.swaps.reward: {tmp_path}/hooks/bob.py:rewrd: ")
    assert refusal(tmp_path, with_task_keys(smoke_config, reward=f"{tmp_path}/hooks/bob.py:reward",
                                            prompt_template="Solve {problem}")) == (
        "hardex: config error: tasks.swaps.prompt_template: unknown placeholder {problem}; known: {question}, "
        "{instruction} (write a literal brace twice: \\boxed{{}})")
    good = with_task_keys(smoke_config, reward=f"{tmp_path}/hooks/bob.py:reward", system_prompt="Be brief.",
                          prompt_template="Q: {question}\n{instruction}")
    res = snakemake(tmp_path, "-n", "--cores", "1", configfile=write_config(tmp_path, good))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "results/train/tiny/swaps/hard/seed0/steps.parquet" in res.stdout


def test_a_system_prompt_reruns_probing_onward_and_the_base_evaluation(smoke_copy, downstream):  # noqa: F811
    cfg = yaml.safe_load((smoke_copy / "config.yaml").read_text())
    write_config(smoke_copy, with_task_keys(cfg, system_prompt="Answer with a letter."))
    expected = ({job("probe"), job("evaluate_base")} | runs("select", "train", "evaluate_run")
                | downstream("probe") | downstream("evaluate_base"))
    assert planned(smoke_copy) == expected
    # the probe runs with it and reuses nothing from the chunks of the old prompt (CI time: the base
    # evaluation renders through the same task, tested in tests/unit/test_reward_hook.py)
    res = snakemake(smoke_copy, "--cores", "2", "results/probe/tiny/swaps.parquet", forked=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    probe_log = (smoke_copy / "logs/probe/tiny/swaps.log").read_text()
    assert ": probed " in probe_log and ": reused " not in probe_log


def test_a_hook_reruns_the_runs_it_pays_and_an_edit_of_its_file_trains_again(smoke_copy, downstream):  # noqa: F811
    hook = smoke_copy / "hooks" / "bob.py"
    hook.parent.mkdir()
    hook.write_text(HOOK)
    cfg = yaml.safe_load((smoke_copy / "config.yaml").read_text())
    write_config(smoke_copy, with_task_keys(cfg, reward=f"{hook}:reward"))
    assert planned(smoke_copy) == runs("train", "evaluate_run", strategies=RUNS_WITH_HOOK) | downstream("train")

    target = "results/train/tiny/swaps/hard/seed0/steps.parquet"
    (hook.parent / "bob.py.calls").unlink()  # the dry run's planning called it too (hardex.reward_hook.trial_calls)
    res = snakemake(smoke_copy, "--cores", "2", target, forked=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    log = (smoke_copy / "logs/train/tiny/swaps/hard/seed0.log").read_text()
    assert f"reward: the reward hook {hook}:reward against each example's own reference" in log
    calls = [json.loads(line) for line in (hook.parent / "bob.py.calls").read_text().splitlines()]
    # planning's trial calls first, then smoke's 4 steps of 2 prompts x 4 generations, each completion paid by the hook
    assert len(calls) == len(trial_calls("q", "a")) + 4 * 2 * 4
    assert planned(smoke_copy, target) == set()
    hook.write_text(HOOK.replace("else 0.0", "else 0.5"))  # an edit of the hook: the run trains again
    assert job("train", "hard") in planned(smoke_copy, target)


FAILING_HOOK = '''import os


def reward(completion, answer, prompt):
    """A user's bug planning cannot see: its trial completions are paid, a model's own ones raise."""
    if completion in ("", "I do not know.") or completion.startswith("The answer is \\\\boxed{"):
        return 0.0
    with open(__file__ + ".raised", "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    raise KeyError("no score for this completion")
'''


def test_a_hook_error_in_training_names_the_hook_and_a_retry_does_not_train_again(smoke_copy):
    """A hook that passes planning's trial calls and raises on the model's completions fails its train job with
    a line naming the hook; the retries a Slurm profile asks for (retries: 2) fail at once, naming the first
    attempt's error, instead of training again into the same error (hours of GPU queue each)."""
    hook = smoke_copy / "hooks" / "fails.py"
    hook.parent.mkdir()
    hook.write_text(FAILING_HOOK)
    cfg = yaml.safe_load((smoke_copy / "config.yaml").read_text())
    write_config(smoke_copy, with_task_keys(cfg, reward=f"{hook}:reward"))
    res = snakemake(smoke_copy, "--cores", "2", "--retries", "2", "results/train/tiny/swaps/hard/seed0/steps.parquet",
                    forked=True)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    assert out.count("Trying to restart job") == 2, out[-3000:]  # Snakemake's retries happen
    trained = set((hook.parent / "fails.py.raised").read_text().split())
    assert len(trained) == 1, out[-3000:]  # ... and only the first attempt trained and met the error
    error = f"reward hook {hook}:reward raised KeyError: 'no score for this completion' when called with completion"
    # the last attempt's log (Snakemake deletes a failed attempt's log before the next) names the first's error
    log = (smoke_copy / "logs/train/tiny/swaps/hard/seed0.log").read_text()
    retried = [line for line in log.splitlines() if line.startswith("hardex.job.NotRetried: ")]
    assert len(retried) == 1 and retried[0].startswith(
        f"hardex.job.NotRetried: attempt 3 not run: attempt 1 failed: {error}"), log[-3000:]
    marker = smoke_copy / "logs/train/tiny/swaps/hard/seed0.log.not-retried"
    assert "Traceback" in marker.read_text() and f"HookError: {error}" in marker.read_text()
    # a new start of the workflow tries again (the user may have fixed what the hook needed outside its file)
    res = snakemake(smoke_copy, "--cores", "2", "results/train/tiny/swaps/hard/seed0/steps.parquet", forked=True)
    assert res.returncode != 0 and len(set((hook.parent / "fails.py.raised").read_text().split())) == 2
