"""A bad config stops the run before any job, with one line that names the key."""

from __future__ import annotations

import copy

import pytest

from hardex.config import ConfigError, check_config
from hardex.schema import SCHEMA
from tests.support import ROOT, with_key

HUB = ROOT / "tests" / "fixtures" / "hub"


CASES = [
    ("selection.strategies", ["hard", "hardest"], "selection.strategies.1: 'hardest' is not allowed"),
    ("selection.band", [0.6, 0.1], "selection.band [0.6, 0.1] is reversed: lo must not exceed hi"),
    ("selection.band", [-0.1, 0.5], "selection.band.0: -0.1 is out of range; must be >= 0"),
    ("selection.band", [0.2, 1.5], "selection.band.1: 1.5 is out of range; must be >= 0 and <= 1"),
    ("selection.band", [0.2], "selection.band: [0.2] is too short; needs 2 entries"),
    ("selection.band", [0.1, 0.2, 0.3], "selection.band: [0.1, 0.2, 0.3] is too long; at most 2 entries"),
    ("selection.online_strategies", ["full"],
     "selection.online_strategies.0: 'full' is not one of selection.strategies"),
    ("selection.allow_unlearnable", ["hardest"],
     "selection.allow_unlearnable.0: 'hardest' is not a strategy; allowed: "),
    ("selection.allow_unlearnable", ["hard", "easy_onlin"],
     "selection.allow_unlearnable.1: 'easy_onlin' is not a strategy"),
    ("grpo.online_max_rounds", -1, "grpo.online_max_rounds: -1 is out of range; must be >= 0"),
    ("selection.budget", -0.1, "selection.budget: -0.1 is out of range; must be > 0 and <= 1"),
    ("selection.budget", 1.5, "selection.budget: 1.5 is out of range"),
    ("probe.k", 0, "probe.k: 0 is out of range; must be >= 1"),
    ("probe.temperature", -1, "probe.temperature: -1 is out of range"),
    ("probe.kay", 3, "probe.kay: unknown key; allowed: "),
    # what a user brings from elsewhere: a percentage budget, TRL's keys, a rehearsal's scorer names
    ("selection.budget", "10%", "selection.budget: '10%' has the wrong type; expected number (a share of the pool: "
                                "write 0.1 for 10 %)"),
    ("selection.budget", 10, "selection.budget: 10 is out of range; must be > 0 and <= 1 (a share of the pool: "
                             "10 % is 0.1)"),
    ("grpo.per_device_train_batch_size", 8, "grpo.per_device_train_batch_size: unknown key (a TRL setting): a step's "
                                            "batch is grpo.prompts_per_step prompts x grpo.num_generations"),
    ("grpo.num_train_epochs", 1, "grpo.num_train_epochs: unknown key (a TRL setting): write grpo.epochs"),
    ("tasks.swaps.reward_funcs", ["r"], "tasks.swaps.reward_funcs: unknown key (a TRL setting): a task's reward is "
                                        "its scorer, or a hook of your own in tasks.<task>.reward"),
    ("models", ..., "models: required key is missing"),
    ("models.tiny.path", ..., "models.tiny.path: required key is missing"),
    ("probe.k", "five", "probe.k: 'five' has the wrong type; expected integer"),
    ("tasks.swaps.pool", "gsm8k/train", "tasks.swaps.pool: 'gsm8k/train' names dataset 'gsm8k'"),
    ("tasks.swaps.benchmarks", ["swaps/dev"], "names split 'dev', which dataset 'swaps' does not define"),
    ("datasets.arith.family", "gsm9k", "datasets.arith.family: 'gsm9k' is not allowed; allowed: arith"),
    ("seeds", [0, 0], "seeds: [0, 0] has duplicate entries"),
    ("grpo.max_steps", 0, "grpo.max_steps: 0 is out of range; must be >= 1"),
    ("selection.budget", 0, "selection.budget: 0 is out of range; must be > 0 and <= 1"),
    ("models.tiny.path", "./no/such/model", "models.tiny.path: './no/such/model' is no directory"),
    ("models.tiny.build.sft_from", ["arith/dev"], "names split 'dev', which dataset 'arith' does not define"),
    ("tasks.swaps.benchmarks", ["aime/test"], "names dataset 'aime', which is not in datasets"),
    ("evaluation.overrides", {"swaps/test": {"n_samples": 2, "pass_k": [4]}}, "needs n_samples >= 4"),
    ("grpo.gradient_accumulation_steps", 3, "grpo.gradient_accumulation_steps: 3 does not divide the 8 completions"),
    ("grpo.gradient_accumulation_steps", 0, "grpo.gradient_accumulation_steps: 0 is out of range; must be >= 1"),
    ("tasks.swaps.scoring", "exact", "tasks.swaps.scoring: 'exact' is not allowed; allowed: lenient, flexible, strict"),
    ("tasks.swaps.scoring", "strict", "tasks.swaps.scoring: 'strict' (paper 1's released scorers) is not available "
                                      "for 'swaps/pool', family 'swaps'; it is for aime2025, gsm8k, shuffled_objects"),
    ("datasets.arith.splits.pool.fields", {"question": "q"},
     "datasets.arith.splits.pool.fields: family 'arith' generates its rows, so it reads no columns to rename"),
    ("datasets.swaps.splits.pool.fields", {"question": 3}, "datasets.swaps.splits.pool.fields.question: 3 has the"),
    # a 10 % subset of the 40-example pool has 4 examples: fewer than one step of 8 prompts
    ("grpo.prompts_per_step", 8, "tasks.swaps: strategy 'hard' selects 4 of the pool's 40 examples, fewer than the 8 "
                                 "prompts of one GRPO step (grpo.prompts_per_step)"),
    ("datasets.swaps.splits.pool.rows", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
     "tasks.swaps: strategy 'hard' selects 1 of the pool's 10 examples, fewer than the 2 prompts"),
    ("datasets.swaps.splits.pool.rows", "no/such/rows.txt",
     "datasets.swaps.splits.pool.rows: 'no/such/rows.txt' is no file"),
    # non-finite numbers pass every schema bound (comparisons with NaN are false): refused by key first
    ("probe.temperature", float("inf"), "probe.temperature: inf is not a finite number"),
    ("grpo.learning_rate", float("nan"), "grpo.learning_rate: nan is not a finite number"),
    ("selection.budget", float("nan"), "selection.budget: nan is not a finite number"),
    ("models.tiny.size_b", float("inf"), "models.tiny.size_b: inf is not a finite number"),
    ("report", {"ci_level": float("nan")}, "report.ci_level: nan is not a finite number"),
    # the catch-up table's equivalence margin: a positive finite number of points
    ("report", {"equivalence_margin": 0}, "report.equivalence_margin: 0 is out of range; must be > 0 and <= 100"),
    ("report", {"equivalence_margin": -5}, "report.equivalence_margin: -5 is out of range; must be > 0"),
    ("report", {"equivalence_margin": "5 points"}, "report.equivalence_margin: '5 points' has the wrong type"),
    ("report", {"equivalence_margin": float("nan")}, "report.equivalence_margin: nan is not a finite number"),
    ("report", {"equivalence_margin": float("inf")}, "report.equivalence_margin: inf is not a finite number"),
    # what a job would find out after compute started, known at planning time
    ("selection.budget", 0.001, "tasks.swaps: strategy 'hard': budget 0.001 of a pool of 40 selects no example"),
    ("datasets.swaps.splits.pool.people", [5, 3], "datasets.swaps.splits.pool.people: [5, 3] must be [low, high]"),
    ("datasets.swaps.splits.pool", {"n": 200, "seed": 1, "difficulty": [0, 0], "people": [3, 3]},
     "datasets.swaps.splits.pool.n: 200 items asked, but only about 315 distinct ones exist in this split"),
    ("datasets.swaps.splits.pool.n", 10**9,
     "datasets.swaps.splits.pool.n: 1000000000 is out of range; must be >= 1 and <= 1000000"),
    ("probe.k", 10**9, "probe.k: 1000000000 is out of range; must be >= 1 and <= 4096"),
    ("datasets.swaps.splits.test", {"n": 12, "seed": 2, "difficulty": [1, 3], "start": 8, "stop": 4},
     "datasets.swaps.splits.test: start 8 is not before stop 4: no rows"),
    ("evaluation.decoding", {"n_samples": 1, "temperature": 1.0, "max_new_tokens": 40, "pass_k": [2]},
     "evaluation.decoding.pass_k: [2] needs n_samples >= 2 for benchmark swaps/test; "
     "evaluation.decoding.n_samples is 1"),
    ("tasks.swaps.allow_overlap", -1, "tasks.swaps.allow_overlap: -1 is out of range; must be >= 0"),
    # the smoke config fully fine-tunes its built model
    ("grpo.quantization", "4bit",
     "grpo.quantization: 4bit base weights train only LoRA adapters; set grpo.finetune: lora"),
    ("grpo.processes", 3,
     "grpo.processes: 3 processes x 1 micro-batches (gradient_accumulation_steps) do not divide the 8"),
    ("grpo.distributed", "deepspeed", "grpo.distributed: 'deepspeed' is not allowed; allowed: multi_gpu, zero1"),
    # YAML 1.1 reads 3e-5 as a string (issue 46): the refusal says what to write
    ("grpo.learning_rate", "3e-5", "grpo.learning_rate: '3e-5' has the wrong type; expected number (YAML reads 3e-5 "
                                   "as text: write 3.0e-5)"),
    # a sequential design's keys and arithmetic, a model's tasks
    ("seeds", {"first": 4, "batch": 2}, "seeds.max: required key is missing"),
    ("seeds", {"first": 4, "batch": 2, "max": 3}, "seeds.max: at least seeds.first (4; got 3)"),
    ("seeds", {"first": 2, "batch": 1, "max": 3, "deciding": [["hard", "hardest"]]},
     "seeds.deciding[0]: 'hardest' is no run of this config"),
    ("seeds", "all", "seeds: 'all' has the wrong type; expected array or object"),
    ("models.tiny.tasks", ["arith"], "models.tiny.tasks: 'arith' is no task of this config (swaps)"),
    # a benchmark that is the pool (issue 46): refused at planning, not by the overlap job after the data are made
    ("tasks.swaps.benchmarks", ["swaps/pool"], "tasks.swaps.benchmarks[0]: 'swaps/pool' is the task's pool"),
]


@pytest.mark.parametrize("path,value,message", CASES, ids=[f"{p}={v!r}" for p, v, _ in CASES])
def test_bad_config_names_the_key(smoke_config, path, value, message):
    with pytest.raises(ConfigError) as err:
        check_config(with_key(smoke_config, path, value))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_scoring_refusal_lists_only_what_a_user_may_write(smoke_config):
    """rehearsal+<scoring> is hardex-rehearse's to write: a user's typo is not offered it."""
    with pytest.raises(ConfigError) as err:
        check_config(with_key(smoke_config, "tasks.swaps.scoring", "exact"))
    assert str(err.value) == "tasks.swaps.scoring: 'exact' is not allowed; allowed: lenient, flexible, strict"


def test_defaults_are_filled(smoke_config):
    cfg = check_config(copy.deepcopy(smoke_config))
    assert cfg["grpo"]["beta"] == 0.0 and cfg["grpo"]["loss_type"] == "grpo"
    assert cfg["generation"]["backend"] == "transformers"
    assert cfg["probe"]["top_p"] == 1.0


def _real_data_config(smoke_config: dict, tmp_path) -> dict:
    """The smoke config plus a strict GSM8K task on fixture files, with a BBH benchmark in the released
    code's columns (question, answer) read through `fields` (the hub fixture's rows, renamed so: planning
    reads a local file's columns)."""
    import json

    released = tmp_path / "released_three_objects.json"
    rows = json.loads((HUB / "bbh/tracking_shuffled_objects_three_objects.json").read_text())
    released.write_text(json.dumps([{"question": r["input"], "answer": r["target"]} for r in rows]))
    cfg = copy.deepcopy(smoke_config)
    cfg["selection"]["budget"] = 0.5  # the fixture pool has 6 questions, which planning counts: 10 % is none
    cfg["datasets"]["gsm8k"] = {"family": "gsm8k", "splits": {"train": {"file": str(HUB / "gsm8k/train.jsonl")},
                                                               "test": {"file": str(HUB / "gsm8k/test.jsonl")}}}
    cfg["datasets"]["bbh"] = {"family": "shuffled_objects", "splits": {"test": {
        "file": str(released), "objects": [3], "fields": {"input": "question", "target": "answer"}}}}
    cfg["datasets"]["math"] = {"family": "math", "splits": {"test": {"file": str(HUB / "math/test.jsonl")}}}
    cfg["tasks"]["gsm8k"] = {"pool": "gsm8k/train", "benchmarks": ["gsm8k/test", "bbh/test"], "scoring": "strict"}
    return cfg


def test_strict_scoring_and_fields_for_the_families_that_have_them(smoke_config, tmp_path):
    cfg = check_config(_real_data_config(smoke_config, tmp_path))
    assert cfg["tasks"]["gsm8k"]["scoring"] == "strict" and cfg["tasks"]["swaps"]["scoring"] == "lenient"
    assert cfg["datasets"]["bbh"]["splits"]["test"]["fields"] == {"input": "question", "target": "answer"}


def test_strict_scoring_refuses_a_benchmark_without_a_released_scorer(smoke_config, tmp_path):
    cfg = _real_data_config(smoke_config, tmp_path)
    cfg["tasks"]["gsm8k"]["benchmarks"].append("math/test")
    with pytest.raises(ConfigError, match=r"^tasks\.gsm8k\.scoring: 'strict' .* for 'math/test', family 'math'; it "
                                          r"is for aime2025, gsm8k, shuffled_objects$"):
        check_config(cfg)


def test_fields_role_the_family_does_not_read_is_refused(smoke_config, tmp_path):
    cfg = _real_data_config(smoke_config, tmp_path)
    cfg["datasets"]["gsm8k"]["splits"]["test"]["fields"] = {"question": "q", "solution": "s"}
    with pytest.raises(ConfigError, match=r"^datasets\.gsm8k\.splits\.test\.fields: unknown role\(s\) \['solution'\] "
                                          r"for family 'gsm8k'; its roles: question, answer$"):
        check_config(cfg)


def test_missing_local_dataset_file_is_refused_before_any_job(smoke_config, tmp_path):
    cfg = copy.deepcopy(smoke_config)
    cfg["datasets"]["gsm8k"] = {"family": "gsm8k", "splits": {"test": {"file": str(tmp_path / "nope.jsonl")}}}
    with pytest.raises(ConfigError, match=r"datasets.gsm8k.splits.test.file: '.*nope.jsonl' does not exist"):
        check_config(cfg)


def test_grpo_batch_is_divisible_by_the_group_size_by_construction(smoke_config):
    """The config states prompts per step and generations per prompt; one update sees their product,
    generated as one batch, whatever the micro-batching."""
    from hardex.training import grpo_args

    g = check_config(copy.deepcopy(smoke_config))["grpo"]
    for gens, prompts, accum in [(2, 1, 1), (8, 1, 1), (8, 32, 1), (5, 3, 1), (8, 32, 8), (8, 1, 2), (5, 3, 5)]:
        s = {**g, "num_generations": gens, "prompts_per_step": prompts, "gradient_accumulation_steps": accum}
        args = grpo_args(s, 0, "/tmp/x", use_cpu=True, steps=s["max_steps"])
        assert args.per_device_train_batch_size * args.gradient_accumulation_steps == gens * prompts
        assert args.generation_batch_size == gens * prompts and args.steps_per_generation == accum
        assert args.generation_batch_size % args.num_generations == 0


def test_repeating_small_subsets_is_a_choice_the_config_can_make(smoke_config):
    cfg = with_key(with_key(smoke_config, "grpo.prompts_per_step", 8), "grpo.repeat_small_subsets", True)
    assert check_config(cfg)["grpo"]["repeat_small_subsets"] is True


def test_a_model_grpo_override_changes_only_the_keys_it_writes(smoke_config):
    """The schema's defaults once filled every model override, so one LoRA key silently reset the learning
    rate, the steps and every other top-level grpo setting of that model to the schema's defaults."""
    from hardex.settings import grpo_settings

    cfg = copy.deepcopy(smoke_config)
    cfg["models"]["tiny"]["grpo"] = {"lora": {"target_modules": ["qkv_proj", "o_proj"]}}
    cfg = check_config(cfg)
    g = grpo_settings(cfg, "tiny")
    assert g["lora"]["target_modules"] == ["qkv_proj", "o_proj"] and g["lora"]["r"] == 32
    assert {k: v for k, v in g.items() if k != "lora"} == {k: v for k, v in cfg["grpo"].items() if k != "lora"}
    assert g["learning_rate"] == smoke_config["grpo"]["learning_rate"] and g["max_steps"] == 4


def test_vllm_rollouts_carry_the_engine_settings_into_the_run(smoke_config):
    """The engine's settings decide the rollouts' samples (dtype aside), so they are part of the run's
    settings, and of its checkpoints' hash; other runs do not carry them."""
    from hardex.settings import grpo_settings

    cfg = copy.deepcopy(smoke_config)
    cfg["models"]["tiny"]["grpo"] = {"rollouts": "vllm"}
    cfg["generation"] = {"vllm": {"max_model_len": 512}}
    g = grpo_settings(check_config(cfg), "tiny")
    assert g["rollouts"] == "vllm" and g["vllm"]["max_model_len"] == 512
    assert "vllm" not in grpo_settings(check_config(copy.deepcopy(smoke_config)), "tiny")


def test_online_runs_are_added_per_online_strategy_and_need_hardexs_rollouts(smoke_config):
    from hardex.settings import run_grpo_settings, run_strategies

    cfg = copy.deepcopy(smoke_config)
    cfg["selection"]["online_strategies"] = ["random"]
    cfg["selection"].pop("controls")
    cfg = check_config(cfg)
    assert run_strategies(cfg) == ["hard", "easy", "random", "random_online"]
    assert run_grpo_settings(cfg, "tiny", "random_online")["online_filtering"] is True
    assert "online_filtering" not in run_grpo_settings(cfg, "tiny", "random")  # its settings as before
    cfg["models"]["tiny"]["grpo"] = {"rollouts": "trl"}
    with pytest.raises(ConfigError, match="model 'tiny' samples with TRL's generate"):
        check_config(cfg)


def test_adaptive_probing_settles_every_boundary_the_selection_needs(smoke_config):
    from hardex.settings import probe_settings

    cfg = copy.deepcopy(smoke_config)
    cfg["selection"]["strategies"] = ["hard", "medium", "random"]
    cfg["probe"]["adaptive"] = {"enabled": True}
    settings = probe_settings(check_config(copy.deepcopy(cfg)), "swaps")
    assert settings["adaptive"]["strategies"] == ["hard", "medium"]  # derived: medium's edges are settled too
    cfg["probe"]["adaptive"]["strategies"] = ["hard", "easy"]
    with pytest.raises(ConfigError, match=r"probe.adaptive.strategies: \['hard', 'easy'\] leaves \['medium'\]"):
        check_config(cfg)


def test_rows_of_a_split_can_come_from_a_file(tmp_path, smoke_config):
    rows = tmp_path / "rows.txt"
    rows.write_text("# released pool, one row per line\n" + "\n".join(map(str, range(30))) + "\n")
    cfg = check_config(with_key(smoke_config, "datasets.swaps.splits.pool.rows", str(rows)))
    assert cfg["datasets"]["swaps"]["splits"]["pool"]["rows"] == list(range(30))  # params carry the rows


def test_a_name_that_could_share_a_path_with_another_output_is_refused(smoke_config):
    """A task named 'swaps.samples' had the probe table results/probe/tiny/swaps.samples.parquet, which is task
    swaps' samples file: the dry run planned both and selection failed later on a missing column."""
    cfg = copy.deepcopy(smoke_config)
    cfg["tasks"]["swaps.samples"] = cfg["tasks"]["swaps"]
    with pytest.raises(ConfigError, match=r"^tasks: 'swaps.samples' does not match .* a dot could make two outputs"):
        check_config(cfg)


def test_no_two_outputs_share_a_path():
    """Every path template of the layout (the rules' outputs), filled with names the schema allows (dashes,
    underscores, digits, names that are words of the layout), gives each job its own paths."""
    import itertools
    import re

    from hardex import layout

    templates = [v for v in vars(layout).values() if isinstance(v, str)] + list(layout.TIMINGS.values())
    wildcards = {"model", "task", "strategy", "seed", "dataset", "split"}
    patterns = {p for p in templates if p.startswith("results/")
                and set(re.findall(r"\{([^}]*)\}", p)) <= wildcards and "{" in p}
    assert len(patterns) >= 12
    import yaml

    allowed = yaml.safe_load(SCHEMA.read_text())["$defs"]["name"]["pattern"]
    candidates = ["a", "a-1", "a_1", "base", "samples", "seed1", "chunks", "pool", "a.samples", "a.chunks", "a.tsv"]
    names = [n for n in candidates if re.fullmatch(allowed, n)]  # every name a config may use
    paths: dict[str, tuple] = {}
    for pattern in sorted(patterns):
        fields = sorted(set(re.findall(r"\{(\w+)\}", pattern)))
        for values in itertools.product(*[(["0", "1"] if f == "seed" else names) for f in fields]):
            path = pattern.format(**dict(zip(fields, values)))
            job = (pattern, values)
            assert paths.setdefault(path, job) == job, f"{path}: {paths[path]} and {job}"
            for other in (path + ".chunks", path.replace(".parquet", ".samples.parquet")):  # files beside outputs
                assert other not in paths or paths[other][0] == pattern, f"{other} is also {paths[other]}"


def test_a_probe_sampling_otherwise_than_grpo_is_a_notice_at_planning_not_an_error(smoke_config):
    from hardex.settings import sampling_notices

    cfg = check_config(copy.deepcopy(smoke_config))
    assert sampling_notices(cfg) == []
    smoke_config["grpo"]["temperature"] = 0.7
    cfg = check_config(smoke_config)  # accepted
    assert sampling_notices(cfg) == [
        "tiny/swaps: the probe did not sample as GRPO does: temperature 1 in the probe vs 0.7 in GRPO "
        "(probe.temperature, grpo.temperature). Pass rates, the selection and the expected share of mixed "
        "groups describe the probe's decoding, not GRPO's."]


GREEDY = {"n_samples": 1, "temperature": 0, "max_new_tokens": 40, "pass_k": [1]}
EVALUATION_CASES = [  # (evaluation keys, refusal)
    ({"greedy": True, "overrides": {"swaps/ood": GREEDY}},
     "evaluation.greedy: benchmark swaps/ood is already decoded greedily (temperature 0)"),
    ({"base_pass_k": 0}, "evaluation.base_pass_k: 0 is out of range; must be >= 1"),
    ({"base_pass_k": 2, "decoding": {**GREEDY, "n_samples": 4, "temperature": 1.0}},
     "evaluation.base_pass_k: 2 is below the 4 samples (n_samples) the checkpoints take on swaps/test (task swaps)"),
    ({"base_pass_k": 8, "decoding": GREEDY},
     "evaluation.base_pass_k: 8 samples of the base model on swaps/test (task swaps), whose decoding is greedy"),
]


@pytest.mark.parametrize("keys,message", EVALUATION_CASES, ids=[m.split(":")[0] + str(i) for i, (_, m) in
                                                                 enumerate(EVALUATION_CASES)])
def test_greedy_and_base_pass_k_are_refused_where_they_cannot_apply(smoke_config, keys, message):
    cfg = smoke_config
    for key, value in keys.items():
        cfg = with_key(cfg, f"evaluation.{key}", value)
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_greedy_beside_sampling_and_the_base_pass_k_are_accepted(smoke_config):
    cfg = check_config(with_key(with_key(smoke_config, "evaluation.greedy", True), "evaluation.base_pass_k", 8))
    assert cfg["evaluation"]["greedy"] is True and cfg["evaluation"]["base_pass_k"] == 8
    plain = check_config(copy.deepcopy(smoke_config))["evaluation"]
    assert plain["greedy"] is False and plain["base_pass_k"] is None


def test_a_local_pool_too_small_for_one_step_is_refused_at_planning(smoke_config, tmp_path):
    """Issue 46: 10 % of a 50-row JSONL pool is 5 examples, fewer than a step's prompts; planning did not count a
    local file's rows, so every train job queued for a GPU, loaded its model and only then stopped."""
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(f'{{"q": "What is {i} + 1?", "a": "{i + 1}"}}\n' for i in range(50)))
    cfg = copy.deepcopy(smoke_config)
    cfg["datasets"]["own"] = {"family": "qa", "splits": {
        "pool": {"file": str(pool), "fields": {"question": "q", "answer": "a"}},
        "test": {"file": str(pool), "fields": {"question": "q", "answer": "a"}, "start": 40}}}
    cfg["tasks"] = {"own": {"pool": "own/pool", "benchmarks": ["own/test"], "allow_overlap": 10}}
    cfg["grpo"]["prompts_per_step"] = 8
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    assert "selects 5 of the pool's 50 examples, fewer than the 8 prompts of one GRPO step" in str(err.value)
    cfg["grpo"]["prompts_per_step"] = 4  # 5 >= 4: a step fits
    check_config(cfg)


def test_a_fields_column_missing_from_a_local_file_is_refused_at_planning(smoke_config, tmp_path):
    """Issue 46: a misnamed column surfaced only when the dataset job ran; planning reads the file's first row."""
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(f'{{"q": "What is {i} + 1?", "a": "{i + 1}"}}\n' for i in range(50)))
    cfg = copy.deepcopy(smoke_config)
    cfg["datasets"]["own"] = {"family": "qa", "splits": {"pool": {"file": str(pool), "fields": {"question": "question",
                                                                                                "answer": "a"}}}}
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    assert str(err.value) == (f"datasets.own.splits.pool.fields.question: column 'question' is not in {pool} "
                              "(its first row's columns: q, a)")


def own_pool(smoke_config, pool, **fields) -> dict:
    cfg = copy.deepcopy(smoke_config)
    cfg["datasets"]["own"] = {"family": "qa", "splits": {
        "pool": {"file": str(pool), "fields": {"question": "q", "answer": "a", **fields}}}}
    return cfg


def test_a_local_pool_the_data_job_would_refuse_is_refused_at_planning(smoke_config, tmp_path):
    """Issue 61: a row without its answer or a repeated id stopped the data job, after planning had read the file."""
    pool = tmp_path / "pool.jsonl"
    rows = [f'{{"id": "r{i}", "q": "What is {i} + 1?", "a": "{i + 1}"}}' for i in range(50)]
    pool.write_text("\n".join(rows[:7] + ['{"id": "r7", "q": "What is 7 + 1?"}'] + rows[8:]) + "\n")
    with pytest.raises(ConfigError, match=r"^datasets.own.splits.pool: .*pool.jsonl: row 7: .*'a'"):
        check_config(own_pool(smoke_config, pool, id="id"))
    pool.write_text("\n".join(rows[:7] + [rows[3]] + rows[8:]) + "\n")
    with pytest.raises(ConfigError, match=r"^datasets.own.splits.pool: .*duplicate id"):
        check_config(own_pool(smoke_config, pool, id="id"))
    pool.write_text("\n".join(rows) + "\n")
    check_config(own_pool(smoke_config, pool, id="id"))


@pytest.mark.parametrize("kind", ["bom", "array", "csv"])
def test_a_pool_saved_with_a_byte_order_mark_as_a_json_array_or_as_csv_reads_as_its_rows(smoke_config, tmp_path, kind):
    """Issue 61: a BOM hid the first row's columns from planning, a JSON array in a .jsonl file failed as JSON
    lines, and a CSV pool (the docs promise CSV) failed as JSON."""
    import json

    from hardex.tasks import get_task

    rows = [{"q": f"What is {i} + 1?", "a": str(i + 1)} for i in range(20)]
    if kind == "csv":
        pool = tmp_path / "pool.csv"
        pool.write_text("q,a\n" + "".join(f'"{r["q"]}",{r["a"]}\n' for r in rows))
    else:
        pool = tmp_path / "pool.jsonl"
        text = json.dumps(rows, indent=1) if kind == "array" else "".join(json.dumps(r) + "\n" for r in rows)
        pool.write_bytes(("\ufeff" if kind == "bom" else "").encode() + text.encode())
    cfg = check_config(own_pool(smoke_config, pool))
    split = get_task("qa").load_split({"name": "pool", **cfg["datasets"]["own"]["splits"]["pool"]})
    assert split.height == 20 and split["question"][3] == "What is 3 + 1?" and split["answer"][3] == "4"
    # planning sees the columns a misnamed field is checked against
    with pytest.raises(ConfigError, match=r"column 'question' is not in .*\(its first row's columns: q, a\)"):
        check_config(own_pool(smoke_config, pool, question="question"))


def test_the_schemas_families_are_the_task_registrys():
    """A family the registry adds is one the schema allows, and the schema names none the registry lacks."""
    import yaml

    from hardex.tasks import REGISTRY

    schema = yaml.safe_load(SCHEMA.read_text())
    family = schema["properties"]["datasets"]["additionalProperties"]["properties"]["family"]
    assert sorted(family["enum"]) == sorted(REGISTRY)
