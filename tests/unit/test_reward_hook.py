"""A task's own prompt (tasks.<task>.system_prompt, prompt_template) and reward hook (tasks.<task>.reward):
loaded, refused, carried in the settings that rerun what they change, wrapped by the controls, and reaching the
chat template and TRL's trainer."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from hardex.config import ConfigError, check_config
from hardex.controls import RandomReward, RewardSpec, run_reward
from hardex.launch import hook_error_file
from hardex.reward_hook import HookError, check_hook, hook_reward, hook_settings, load_hook, resolved
from hardex.settings import probe_settings, run_grpo_settings
from hardex.tasks import get_task
from hardex.training import train_grpo
from tests.unit.test_training import swaps_rows, tiny_grpo

ROOT = Path(__file__).resolve().parents[2]

HOOK = '''
def reward(completion, answer, prompt):
    """Pays a fixed string: 1 where the completion says Bob, else 0.25."""
    return 1.0 if "Bob" in completion else 0.25
'''


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# ---- loading and refusing ----


def test_a_hook_loads_from_a_module_and_from_a_package_module(tmp_path, monkeypatch):
    write(tmp_path / "my_rewards.py", HOOK)
    write(tmp_path / "mypkg" / "__init__.py", "")
    write(tmp_path / "mypkg" / "scoring.py", HOOK.replace("def reward", "def score"))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_hook("my_rewards:reward")("Bob", "(B)", "p") == 1.0
    assert load_hook("mypkg.scoring:score")("Alice", "(B)", "p") == 0.25
    assert hook_settings("mypkg.scoring:score")["sha256"] is not None  # the module's file, hashed


def test_a_hook_loads_from_a_file_relative_to_the_workflow_directory_or_absolute(tmp_path):
    hook = write(tmp_path / "hooks" / "bob.py", HOOK)
    assert load_hook("hooks/bob.py:reward", root=tmp_path)("Bob!", "x", "p") == 1.0
    assert load_hook(f"{hook}:reward")("no", "x", "p") == 0.25  # an absolute path, from any root
    assert resolved("hooks/bob.py:reward", root=tmp_path) == f"{hook.resolve()}:reward"
    assert resolved("mypkg.scoring:score", root=tmp_path) == "mypkg.scoring:score"  # a module is found by import


def test_a_relative_hook_file_is_read_from_the_study_folder_first_as_data_files_are(tmp_path, monkeypatch):
    """issue 61: `reward: my_reward.py:reward` beside a user's config was looked for in the hardex checkout."""
    study, checkout = tmp_path / "my-study", tmp_path / "hardex"
    write(study / "my_reward.py", HOOK)
    write(checkout / "examples" / "hook.py", HOOK.replace("0.25", "0.5"))
    monkeypatch.chdir(study)
    monkeypatch.setenv("HARDEX_WORKFLOW_DIR", str(checkout))
    assert load_hook("my_reward.py:reward")("no", "x", "p") == 0.25
    assert resolved("my_reward.py:reward") == f"{(study / 'my_reward.py').resolve()}:reward"
    # a file only the checkout has (its examples) is still found there
    assert load_hook("examples/hook.py:reward")("no", "x", "p") == 0.5
    with pytest.raises(HookError, match="read from the working directory, then from the workflow's"):
        load_hook("missing.py:reward")


@pytest.mark.parametrize("spec,files,message", [
    ("no_such_module_anywhere:reward", {}, "no module named 'no_such_module_anywhere'"),
    ("hooks/missing.py:reward", {}, "no file"),
    ("hooks/r.py:missing", {"hooks/r.py": HOOK}, "defines no 'missing'"),
    ("hooks/r.py:reward", {"hooks/r.py": "def reward(completion, answer):\n    return 1.0\n"},
     "cannot be called as reward(completion, answer, prompt)"),
    ("hooks/r.py:reward", {"hooks/r.py": "def reward(completion, *, answer, prompt):\n    return 1.0\n"},
     "cannot be called as reward(completion, answer, prompt)"),
    ("hooks/r.py:reward", {"hooks/r.py": "reward = 3\n"}, "is not callable"),
    ("hooks/r.py:reward", {"hooks/r.py": "import not_installed_anywhere\n"}, "ModuleNotFoundError"),
    ("hooks/r.py", {"hooks/r.py": HOOK}, "is not module:function"),
    ("a-b:reward", {}, "is no module name"),
])
def test_a_hook_that_cannot_be_called_as_the_scorer_is_refused_saying_why(tmp_path, spec, files, message):
    for name, text in files.items():
        write(tmp_path / name, text)
    with pytest.raises(HookError) as e:
        check_hook(spec, root=tmp_path)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_hook_with_defaults_or_varargs_is_accepted(tmp_path):
    write(tmp_path / "r.py", "def reward(completion, answer, prompt, weight=2.0, **rest):\n    return weight\n"
                             "def anything(*args):\n    return len(args)\n")
    assert load_hook("r.py:reward", root=tmp_path)("c", "a", "p") == 2.0
    assert load_hook("r.py:anything", root=tmp_path)("c", "a", "p") == 3


def test_the_hooks_reward_is_scaled_and_a_value_that_is_no_number_stops_the_run(tmp_path):
    write(tmp_path / "r.py", HOOK + "\ndef broken(completion, answer, prompt):\n    return 'yes'\n"
                                    "\ndef nan(completion, answer, prompt):\n    return float('nan')\n")
    assert hook_reward("r.py:reward", 2.0, root=tmp_path)("Bob", "a", "p") == 2.0
    with pytest.raises(HookError, match="r.py:broken returned 'yes', not a number"):
        hook_reward("r.py:broken", root=tmp_path)("c", "a", "p")
    with pytest.raises(HookError, match="returned nan"):
        hook_reward("r.py:nan", root=tmp_path)("c", "a", "p")


def test_a_hook_that_raises_is_named_with_the_call_that_raised(tmp_path):
    write(tmp_path / "r.py", "def picky(completion, answer, prompt):\n    return float(completion)\n")
    with pytest.raises(HookError, match=r"reward hook r.py:picky raised ValueError: could not convert .* when called "
                                        r"with completion 'Bob', answer 'a'"):
        hook_reward("r.py:picky", root=tmp_path)("Bob", "a", "p")


@pytest.mark.parametrize("body, message", [
    ("return None", "returned None, not a number"),
    ("return 'yes'", "returned 'yes', not a number"),
    ("return float('nan')", "returned nan"),
    ("return 1.0 if completion else 1 / 0",
     "raised ZeroDivisionError: division by zero when called with completion ''"),
    ("return float(completion.split()[-1])", "raised ValueError"),
])
def test_a_hook_that_returns_no_number_or_raises_is_refused_at_planning(smoke_config, tmp_path, body, message):
    """Issue 61: planning only imported the hook; a None, a string, a NaN or an exception surfaced inside the
    train job, after the queue. Planning now calls it on a pool example with a right, an empty and a wrong
    completion."""
    write(tmp_path / "h.py", f"def reward(completion, answer, prompt):\n    {body}\n")
    cfg = copy.deepcopy(smoke_config)
    cfg["tasks"]["swaps"]["reward"] = f"{tmp_path}/h.py:reward"
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    assert str(e.value).startswith(f"tasks.swaps.reward: reward hook {tmp_path}/h.py:reward ")
    assert message in str(e.value)


def test_planning_calls_the_hook_with_the_pools_first_example(smoke_config, tmp_path):
    seen = tmp_path / "seen.txt"
    write(tmp_path / "h.py", f"def reward(completion, answer, prompt):\n"
                             f"    open({str(seen)!r}, 'a').write(repr((completion, answer, prompt)) + '\\n')\n"
                             f"    return 1.0\n")
    cfg = copy.deepcopy(smoke_config)
    cfg["tasks"]["swaps"]["reward"] = f"{tmp_path}/h.py:reward"
    check_config(cfg)
    calls = [eval(line) for line in seen.read_text().splitlines()]
    pool = get_task(cfg["datasets"]["swaps"]["family"]).load_split(
        {"name": "pool", **cfg["datasets"]["swaps"]["splits"]["pool"]})
    first = pool.row(0, named=True)
    assert len(calls) == 3 and {c[1:] for c in calls} == {(first["answer"], first["question"])}
    assert {c[0] for c in calls} == {f"The answer is \\boxed{{{first['answer']}}}.", "", "I do not know."}


def test_editing_the_hooks_file_changes_what_the_run_is_keyed_by(tmp_path):
    hook = write(tmp_path / "r.py", HOOK)
    before = hook_settings("r.py:reward", root=tmp_path)
    hook.write_text(HOOK.replace("0.25", "0.5"))
    after = hook_settings("r.py:reward", root=tmp_path)
    assert before["spec"] == after["spec"] == "r.py:reward" and before["sha256"] != after["sha256"]


def test_the_documented_example_hook_loads_from_the_workflow_directory():
    example = load_hook("docs/examples/reward_hook.py:reward")  # README: tasks.<task>.reward's example
    assert example("so \\boxed{7}", "7", "p") == 1.0
    assert example("\\boxed{8}", "7", "p") == 0.1 and example("7", "7", "p") == 0.0
    assert hook_settings("docs/examples/reward_hook.py:reward")["sha256"] is not None


# ---- the config: refused at planning, carried in params only where set ----


def test_a_bad_template_or_hook_is_refused_naming_the_key(smoke_config, tmp_path):
    def refusal(key, value):
        cfg = copy.deepcopy(smoke_config)
        cfg["tasks"]["swaps"][key] = value
        with pytest.raises(ConfigError) as e:
            check_config(cfg)
        return str(e.value)

    assert refusal("prompt_template", "Answer this.").startswith(
        "tasks.swaps.prompt_template: the template never names {question}")
    assert refusal("prompt_template", "{question} {answer}").startswith(
        "tasks.swaps.prompt_template: unknown placeholder {answer}")
    assert refusal("prompt_template", "{question} \\boxed{}").startswith(
        "tasks.swaps.prompt_template: unknown placeholder {}")
    assert refusal("reward", "no_such_module_anywhere:reward").startswith(
        "tasks.swaps.reward: no_such_module_anywhere:reward: no module named")
    write(tmp_path / "two.py", "def reward(completion, answer):\n    return 1.0\n")
    assert "cannot be called as reward(completion, answer, prompt)" in refusal("reward", f"{tmp_path}/two.py:reward")


def test_a_config_without_the_keys_keeps_every_rules_params(smoke_config):
    cfg = check_config(copy.deepcopy(smoke_config))
    assert "prompt" not in probe_settings(cfg, "swaps")
    for strategy in ("hard", "hard_random_reward", "hard_format"):
        assert not {"prompt", "reward_hook"} & set(run_grpo_settings(cfg, "tiny", strategy, "swaps"))


def test_the_prompt_and_hook_reach_the_settings_of_the_jobs_they_change(smoke_config, tmp_path):
    hook = write(tmp_path / "r.py", HOOK)
    cfg = copy.deepcopy(smoke_config)
    cfg["tasks"]["swaps"].update(system_prompt="Be brief.", prompt_template="Q: {question}\n{instruction}",
                                 reward=f"{hook}:reward")
    cfg = check_config(cfg)
    prompt = {"prompt_template": "Q: {question}\n{instruction}", "system_prompt": "Be brief."}
    assert probe_settings(cfg, "swaps")["prompt"] == prompt
    g = run_grpo_settings(cfg, "tiny", "hard", "swaps")
    assert g["prompt"] == prompt and g["reward_hook"] == hook_settings(f"{hook}:reward")
    assert "reward_hook" in run_grpo_settings(cfg, "tiny", "hard_random_reward", "swaps")
    # the format control pays the answer's form, never the hook: an edited hook leaves its runs as they are
    assert "reward_hook" not in run_grpo_settings(cfg, "tiny", "hard_format", "swaps")


# ---- rendering: one task's prompt on every path ----


def test_the_template_and_system_prompt_reach_the_chat_template(tmp_path):
    from hardex.architectures import standin_spec
    from hardex.job import renderer
    from hardex.rehearsal.standin import standin_tokenizer

    spec = standin_spec("Qwen/Qwen3-4B")  # Qwen3's chat template on a tiny tokenizer
    standin_tokenizer(spec["chat_template"], spec).save_pretrained(tmp_path / "tok")
    settings = {"system_prompt": "You answer in one word.", "prompt_template": "Question: {question}\n{instruction}"}
    task = get_task("swaps", "lenient", settings)
    text = renderer(str(tmp_path / "tok"), True, task.prompt_format.system)(task.prompt({"question": "Bob has?"}))
    assert text.startswith("<|im_start|>system\nYou answer in one word.<|im_end|>\n<|im_start|>user\n"
                           "Question: Bob has?\nPut your final answer within \\boxed{}, e.g. \\boxed{(A)}.<|im_end|>")
    # the default: no system turn, the question then the instruction, as before these keys
    plain = get_task("swaps")
    default = renderer(str(tmp_path / "tok"), True, plain.prompt_format.system)(plain.prompt({"question": "Bob has?"}))
    assert "system" not in default and "<|im_start|>user\nBob has?\nPut your final answer" in default
    # a model without a chat template reads the system prompt as its first paragraph
    assert renderer(str(tmp_path / "tok"), False, "Be brief.")("Q") == "Be brief.\n\nQ\n"


def test_a_rehearsals_scorer_asks_with_the_tasks_prompt():
    task = get_task("addition", "rehearsal+lenient", {"prompt_template": "Add: {question}"})
    assert task.prompt({"question": "1 + 2?"}) == "Add: 1 + 2?"
    assert get_task("addition", "rehearsal+lenient").prompt({"question": "1 + 2?"}).endswith("\\boxed{}.")


# ---- the controls wrap the hook where they wrap the scorer ----


def test_the_controls_wrap_the_hook_in_place_of_the_scorer(tmp_path):
    write(tmp_path / "r.py", HOOK)
    spec, task = f"{tmp_path}/r.py:reward", get_task("swaps")
    assert run_reward(None, task, 1.0, 0, spec)("Bob", "(A)", "p") == 1.0  # the scorer would say 0
    assert run_reward("shuffled", task, 1.0, 0, spec)("Alice", "(A)", "p") == 0.25
    random = run_reward("random_reward", task, 1.0, 0, spec)
    assert isinstance(random, RandomReward) and random("Bob", "(A)", "p") == 1.0  # its rate is the hook's
    assert random.batch(["Bob"] * 8, ["(A)"] * 8, ["p"] * 8) == [1.0] * 8  # the hook pays all: rate 1
    # the format control grades the answer's form with the task's extraction, hook or not
    form = run_reward("format", task, 1.0, 0, spec)
    assert form("Bob", "(A)", "p") == 0.0 and form("so \\boxed{(A)}", "(A)", "p") == 1.0


# ---- training: the hook's reward is what TRL's trainer records ----


def recording_hook(tmp_path: Path) -> tuple[str, Path]:
    """A hook paying a fixed string, which writes every call (completion, answer, its reward) to a file."""
    calls = tmp_path / "calls.jsonl"
    write(tmp_path / "hooks" / "bob.py", f'''
        import json

        def reward(completion, answer, prompt):
            value = 1.0 if "Bob" in completion else 0.25
            with open({str(calls)!r}, "a") as fh:
                call = {{"completion": completion, "answer": answer, "prompt": prompt, "reward": value}}
                fh.write(json.dumps(call) + "\\n")
            return value
        ''')
    return "hooks/bob.py:reward", calls


@pytest.fixture
def grpo(smoke_config) -> dict:
    return tiny_grpo(smoke_config, max_steps=2)


def rows(n=4):
    return swaps_rows(n)


def test_the_hooks_reward_reaches_the_trainer(tmp_path, tiny_model, grpo):
    spec, calls = recording_hook(tmp_path)
    hook = resolved(spec, root=tmp_path)
    run_dir = tmp_path / "run"
    # the reward as the train job passes it: as data, built into its function by train_grpo
    train_grpo(str(tiny_model), rows(), RewardSpec("swaps", "lenient", 2.0, hook=hook), grpo, 0, run_dir,
               run_dir / "final", run_dir / "steps.parquet", log=lambda *a: None)
    steps = pl.read_parquet(run_dir / "steps.parquet")
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    per_step = grpo["num_generations"] * grpo["prompts_per_step"]
    assert len(seen) == per_step * grpo["max_steps"]  # every completion of every step, scored by the hook
    assert {c["answer"] for c in seen} == {"(B)"} and {c["prompt"] for c in seen} <= {r["prompt"] for r in rows()}
    # TRL's logged reward of each step is the mean of what the hook paid its completions, times the scale
    expected = [2.0 * sum(c["reward"] for c in seen[i:i + per_step]) / per_step for i in range(0, len(seen), per_step)]
    assert steps["reward_mean"].to_list() == pytest.approx(expected)


def test_a_worker_process_hands_a_hooks_error_to_the_job(tmp_path, tiny_model, grpo):
    """A hook's error in one of a run's processes reaches the job as the hook's line (hardex.launch raises it as a
    HookError, which the job does not retry: hardex.job), not as the launcher's exit status."""
    (tmp_path / "raising.py").write_text("def reward(completion, answer, prompt):\n    raise KeyError('no score')\n")
    ckpt = tmp_path / "run" / "checkpoints"
    ckpt.mkdir(parents=True)
    hook = resolved("raising.py:reward", root=tmp_path)
    job = {"model_path": str(tiny_model), "rows": rows(), "grpo": {**grpo, "precision": "fp32"}, "seed": 0,
           "ckpt_dir": str(ckpt), "resume": None, "steps_total": 2, "trainer_args": {"report_to": []},
           "reward": {"family": "swaps", "scoring": "lenient", "scale": 1.0, "control": None, "hook": hook}}
    (tmp_path / "launch.json").write_text(json.dumps(job))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "CUDA_VISIBLE_DEVICES": ""}
    res = subprocess.run([sys.executable, "-m", "hardex.train_worker", str(tmp_path / "launch.json")], env=env,
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode != 0
    assert hook_error_file(tmp_path / "launch.json").read_text().startswith(
        f"reward hook {hook} raised KeyError: 'no score' when called with completion"), res.stderr[-3000:]


def test_a_worker_process_loads_the_hook_again_by_its_spec(tmp_path, tiny_model, grpo):
    """A run in several processes hands each the reward as data (hardex.train_worker): the hook's spec, not a
    function. One worker started as accelerate starts it, without accelerate, trains with the hook."""
    spec, calls = recording_hook(tmp_path)
    ckpt = tmp_path / "run" / "checkpoints"
    ckpt.mkdir(parents=True)
    job = {"model_path": str(tiny_model), "rows": rows(), "grpo": {**grpo, "precision": "fp32"}, "seed": 0,
           "ckpt_dir": str(ckpt), "resume": None, "steps_total": 2, "trainer_args": {"report_to": []},
           "reward": {"family": "swaps", "scoring": "lenient", "scale": 1.0, "control": None,
                      "hook": resolved(spec, root=tmp_path)}}
    (tmp_path / "launch.json").write_text(json.dumps(job))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "CUDA_VISIBLE_DEVICES": ""}
    res = subprocess.run([sys.executable, "-m", "hardex.train_worker", str(tmp_path / "launch.json")], env=env,
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    assert len(seen) == 2 * grpo["num_generations"] * grpo["prompts_per_step"]
    recorded = [json.loads(line) for line in (ckpt / "steps.jsonl").read_text().splitlines()]
    assert [r["reward_mean"] for r in recorded] == pytest.approx(
        [sum(c["reward"] for c in seen[i:i + 8]) / 8 for i in (0, 8)])
