# Validation and the helpers every rule file uses. The config is checked before any job is planned;
# every value that changes a result reaches its rule through params (Snakemake tracks only those).
import functools
import itertools
import json
import os
import sys
import time
from types import SimpleNamespace

# a bare `report(` at the start of a line opens the global `report:` keyword: import it as another name
from snakemake.io import report as report_entry

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from hardex import layout
from hardex.config import check_or_exit
from hardex.controls import control_notices
from hardex.settings import (
    decodings,
    generation_settings,
    grpo_settings,
    imported_rates,
    model_tasks,
    probe_settings,
    run_grpo_settings,
    run_strategies,
    sampling_notices,
    seed_design,
    seed_list,
    split_source,
    split_spec,
    task_prompt,
    trained_run_dirs,
)
from hardex.architectures import KEPT as ARCHITECTURES
from hardex import job_time
from hardex.checkpoints import lost_by_length
from hardex.cluster import check_partitions_or_exit, snakemake_executor
from hardex.memory_plan import check_plan_or_exit, host_memory_mb
from hardex.gpu_packages import check_packages_or_exit, conda_env
from hardex.model_sources import gguf_file
from hardex.io import file_sha256
from hardex.fetch import offline_jobs
from hardex.tasks import get_task
from hardex.report import plan as report_plan
from hardex.selection import RunName
from hardex.report.tables import TABLES
from hardex.report.recommend import TITLE as RECOMMEND_TITLE
from hardex.report.headline import fresh_headline
from hardex.report.looks import deciding_comparisons
from hardex.selection import tier_values
from hardex.reward_hook import WORKFLOW_DIR_VARIABLE

# a reward hook's relative file is read from the workflow's directory, at planning and in every job (inherited)
os.environ[WORKFLOW_DIR_VARIABLE] = workflow.basedir

config = check_or_exit(
    config,
    workflow.config_settings.configfiles or [Path(workflow.basedir) / "config.yaml"],
)

# every GPU job's memory, estimated from its model's architecture and settings: a plan that cannot fit
# compute.gpu_memory_gb stops here, before any job runs (the estimates print with `snakemake -n`)
check_plan_or_exit(config, show=workflow.is_main_process)
# under the Slurm executor, a slurm_partition (default-resources, set-resources) the cluster lacks stops here
if workflow.is_main_process:
    check_partitions_or_exit(workflow.resource_settings, snakemake_executor())
# a job that asks more GPUs than --resources gpu=N would be run on N by Snakemake, its ranks sharing them
if workflow.is_main_process and (
    short := job_time.gpu_shortfall(
        config, job_time.granted_gpus(workflow.resource_settings)
    )
):
    sys.exit(f"hardex: config error: {short}")
# a probe that samples otherwise than GRPO, or a shuffled control on a choice task, is allowed, and said
if workflow.is_main_process:
    for line in sampling_notices(config) + control_notices(config):
        print(f"hardex: notice: {line}", file=sys.stderr)
# jobs run with the hub offline when the local cache holds every hub model and dataset of the config (local
# jobs inherit the variables, Slurm's through --export=ALL, other executors' as envvars); else a notice says
# what to fetch with hardex-fetch (hardex.fetch)
if workflow.is_main_process:
    hub = offline_jobs(config, workflow.config_settings.configfiles)
    workflow.register_envvars(*hub.variables)
    for line in hub.notices:
        print(f"hardex: notice: {line}", file=sys.stderr)


MODELS = list(config["models"])
# models whose folder (layout.MODEL) the workflow makes, by path, and the job that makes it (built,
# converted from a GGUF file, or a rehearsal's stand-in). Their jobs depend on the folder; the others load a hub id or a directory.
MADE_BY = layout.MADE_BY
BUILT_MODELS = [m for m in MODELS if config["models"][m]["path"] in MADE_BY]
TASKS = list(config["tasks"])
# tasks whose pass rates come from a file (tasks.<task>.probe.from: rule probe_from_file), not from probing
IMPORTED_RATES = imported_rates(config)
PROBED_TASKS = [t for t in TASKS if t not in IMPORTED_RATES]
STRATEGIES = config["selection"]["strategies"]  # each a subset
RUN_STRATEGIES = run_strategies(
    config
)  # each a training run: the subsets', <strategy>_online and <strategy>_<control>
# every seed a run may train with; under a sequential design (seeds: {first, batch, max}) the looks decide
# which runs train which of them (rules/sequential.smk)
SEEDS = seed_list(config)
DESIGN = seed_design(config)
# a new run length alone (max_steps, epochs) without grpo.schedule_steps would delete trained runs' checkpoints
# and train them from the base model: refused here, before any job
if workflow.is_main_process and (
    lost := lost_by_length(trained_run_dirs(config, RUN_STRATEGIES, SEEDS))
):
    sys.exit(f"hardex: config error: {lost}")
# runs that may train on a subset without a learnable example (hardex.learnability)
ALLOW_UNLEARNABLE = config["selection"]["allow_unlearnable"]


# cheap jobs run on the submitting machine under a cluster profile (and may need its internet access)
localrules:
    dataset_split,
    check_overlap,
    select,
    probe_from_file,


wildcard_constraints:
    model="|".join(MODELS),
    task="|".join(TASKS),
    strategy="|".join(RUN_STRATEGIES),
    dataset="[A-Za-z0-9][A-Za-z0-9_-]*",
    split="[A-Za-z0-9][A-Za-z0-9_-]*",
    seed=r"\d+",
    look=r"\d+",


def fill(template):
    """An input function or param: the layout's template filled with the job's wildcards."""
    return lambda wildcards: layout.fill(template, **dict(wildcards.items()))


def data_file(ref):
    """The data file of a 'dataset/split' reference."""
    dataset, split = ref.split("/", 1)
    return layout.fill(layout.DATA, dataset=dataset, split=split)


def run_subset(wildcards):
    """The subset a run trains on: its strategy's, an online or a control run's too (RunName.strategy)."""
    strategy = RunName.parse(wildcards.strategy).strategy
    return layout.fill(layout.SUBSET, **dict(wildcards.items(), strategy=strategy))


def allows_unlearnable(wildcards):
    """Whether a run may train on a subset without a learnable example: it is listed in
    selection.allow_unlearnable, or it is a control of a strategy listed there (the same subset).
    """
    run = RunName.parse(wildcards.strategy)
    return wildcards.strategy in ALLOW_UNLEARNABLE or (
        run.control is not None and run.strategy in ALLOW_UNLEARNABLE
    )


def pool_file(wildcards):
    return data_file(config["tasks"][wildcards.task]["pool"])


def pool_family(wildcards):
    return split_spec(config, config["tasks"][wildcards.task]["pool"])["family"]


def made_by(rule):
    """The models whose folder `rule` makes (build_model, convert_model)."""
    return [m for m in MODELS if MADE_BY.get(config["models"][m]["path"]) == rule]


def one_of(names):
    """A wildcard constraint matching exactly these names (none: nothing), e.g. the models a rule makes."""
    return "|".join(names) or "(?!)"


def model_dir(wildcards):
    """Input that a job needs for its model: the folder the workflow made, or nothing for hub/local ones."""
    return [fill(layout.MODEL)(wildcards)] if wildcards.model in BUILT_MODELS else []


def model_params(wildcards):
    """What identifies the model (its config entry and where from_pretrained finds it)."""
    m = config["models"][wildcards.model]
    path = (
        fill(layout.MODEL)(wildcards) if wildcards.model in BUILT_MODELS else m["path"]
    )
    return {"path": path, "chat": m["chat"], "dtype": m["dtype"]}


def architecture_input(wildcards):
    """The kept config.json a stand-in is built from: an edited one builds it again."""
    return str(
        ARCHITECTURES
        / config["models"][wildcards.model]["architecture"]
        / "config.json"
    )


def gguf_location(wildcards):
    """Where this machine has the GGUF file a model is converted from, for the job to read (under --sdm conda
    the package holding it may be installed only where the workflow is planned). A Path, not a str: Snakemake
    leaves values it cannot represent out of the params it compares, so a reinstall elsewhere reruns nothing;
    the file's sha256 beside it is compared."""
    return gguf_file(config["models"][wildcards.model]["gguf"])


def model_mem_mb(wildcards, attempt):
    """Memory for a job that loads a model (building or converting it): scaled by model size, doubled per retry
    attempt (OOM retries)."""
    c, size = config["compute"], config["models"][wildcards.model]["size_b"]
    return int((c["mem_mb"] + c["mem_mb_per_b"] * size) * attempt)


@functools.cache
def planned_mem_mb():
    """The memory plan's host memory of each (model, job kind) on a CPU run (hardex.memory_plan.host_memory_mb)."""
    return host_memory_mb(config)


def job_mem_mb(kind):
    """Memory of a model's `kind` job (train, probe, evaluate): the plan's on a CPU run, else the size formula
    (train_mem_mb for train jobs); doubled per retry attempt."""

    def mem_mb(wildcards, attempt):
        planned = planned_mem_mb().get((wildcards.model, kind))
        if planned is None:
            return (train_mem_mb if kind == "train" else model_mem_mb)(
                wildcards, attempt
            )
        return planned * attempt

    return mem_mb


def train_mem_mb(wildcards, attempt):
    """A train job's host memory where the plan does not estimate it (on GPUs): compute.mem_mb for each of its grpo.processes processes (Python, torch,
    CUDA, TRL) and one copy of the model (mem_mb_per_b x size_b), not one per process: from_pretrained
    maps the safetensors files, whose pages the processes share in the page cache, then moves the weights
    to each process's GPU (under ZeRO 3 each process loads only its shard)."""
    c, size = config["compute"], config["models"][wildcards.model]["size_b"]
    processes = grpo_settings(config, wildcards.model)["processes"]
    return int((c["mem_mb"] * processes + c["mem_mb_per_b"] * size) * attempt)


def model_runtime(wildcards, attempt):
    """Runtime of a model job whose work is not estimated (building, converting a model)."""
    return job_time.runtime_minutes(config, wildcards.model, None, attempt)


# Slurm's -t of the jobs that generate and train: from their work (hardex.job_time), the splits' rows read
# from their files once they exist (Snakemake sizes a job's resources again when it submits it)
def train_runtime(wildcards, input, attempt):
    return job_time.train_minutes(
        config,
        wildcards.model,
        wildcards.task,
        wildcards.strategy,
        input.subset,
        pool_file(wildcards),
        attempt,
    )


def probe_runtime(wildcards, input, attempt):
    return job_time.probe_minutes(
        config, wildcards.model, wildcards.task, input.pool, attempt
    )


def evaluate_base_runtime(wildcards, input, attempt):
    return job_time.evaluate_base_minutes(
        config,
        wildcards.model,
        base_benchmark_params(wildcards),
        input.benchmarks,
        len(SEEDS),
        attempt,
    )


def evaluate_run_runtime(wildcards, input, attempt):
    return job_time.evaluate_run_minutes(
        config,
        wildcards.model,
        wildcards.task,
        wildcards.strategy,
        eval_benchmark_params(wildcards),
        input.benchmarks,
        pool_file(wildcards),
        attempt,
    )


# `--sdm conda` environments, chosen by what the config's jobs ask for (hardex.gpu_packages.conda_env), and the
# optional packages its GPU settings need (bitsandbytes, deepspeed, vllm): a run stops here without them,
# a dry run shows them (here, or under `--sdm conda` in the environments its jobs will run in)
GENERATION_ENV = f"../envs/{conda_env(config)}.yaml"


def training_env(wildcards):
    return f"../envs/{conda_env(config, wildcards.model)}.yaml"


if workflow.is_main_process:
    # (`conda` may not open a line here: Snakemake would read its keyword)
    in_conda_envs = "conda" in map(str, workflow.deployment_settings.deployment_method)
    check_packages_or_exit(config, in_conda_envs)


MODEL_JOB_THREADS = config["compute"]["threads"]
RUN_JOB_THREADS = config["compute"]["run_threads"]
MODEL_JOB_GPU = config["compute"]["gpu"]


# probe and evaluate: a vLLM engine split over tensor_parallel_size GPUs takes compute.gpu GPUs for each
GENERATION_JOB_GPU = job_time.generation_gpus(config)


def train_gpus(wildcards):
    """compute.gpu GPUs for each training process, and for each GPU of a vLLM server of the run's own."""
    return job_time.train_gpus(config, wildcards.model)


# a vLLM engine on GPUs runs processes of its own beside the job's (its engine core, a worker per GPU): under
# Slurm threads become --cpus-per-task, and 1-2 CPUs would time-slice them
VLLM_ON_GPU = MODEL_JOB_GPU > 0 and config["generation"]["backend"] == "vllm"
VLLM_ENGINE_CPUS = 2 + config["generation"]["vllm"]["tensor_parallel_size"]
PROBE_THREADS = max(MODEL_JOB_THREADS, VLLM_ENGINE_CPUS if VLLM_ON_GPU else 0)
EVALUATE_THREADS = max(RUN_JOB_THREADS, VLLM_ENGINE_CPUS if VLLM_ON_GPU else 0)


def train_threads(wildcards):
    """run_threads for each training process (grpo.processes, hardex.launch), and on GPUs the CPUs of the run's
    vLLM engine (in-process: its engine core) or server (its front end, engine core and a worker per GPU).
    """
    grpo = grpo_settings(config, wildcards.model)
    engine = {"vllm": 1, "vllm-server": 2 + grpo["vllm_server_gpus"]}.get(
        grpo["rollouts"], 0
    )
    return RUN_JOB_THREADS * grpo["processes"] + (engine if MODEL_JOB_GPU > 0 else 0)


def every(template, **fields):
    """The template filled with every model, task, run strategy and seed it names (`fields` narrows them),
    each model with its own tasks (models.<name>.tasks)."""
    values = (
        dict(model=MODELS, task=TASKS, strategy=RUN_STRATEGIES, seed=SEEDS) | fields
    )
    used = {
        k: [v] if isinstance(v, str) else list(v)
        for k, v in values.items()
        if f"{{{k}}}" in template
    }
    return [
        layout.fill(template, **combo)
        for combo in (dict(zip(used, c)) for c in itertools.product(*used.values()))
        if "model" not in combo
        or "task" not in combo
        or combo["task"] in model_tasks(config, combo["model"])
    ]


def benchmark_inputs(wildcards):
    return [data_file(b) for b in config["tasks"][wildcards.task]["benchmarks"]]


def benchmark_params(wildcards):
    """Each benchmark of the task with its family and decoding (what changes its results), and the task's
    prompt where the config sets one (hardex.settings.task_prompt: the key absent otherwise).
    """
    decoding = decodings(config)
    prompt = task_prompt(config, wildcards.task)
    return [
        {
            "ref": b,
            "family": split_spec(config, b)["family"],
            "decoding": decoding[b],
        }
        | ({"prompt": prompt} if prompt else {})
        | scorer_version(split_spec(config, b)["family"])
        for b in config["tasks"][wildcards.task]["benchmarks"]
    ]


def scorer_version(family):
    """{"scorer_version": ...} where a verifier package scores the family (reasoning-gym), so that an upgrade
    evaluates again and the evaluation's recorded params name it; {} for every other family (params as before).
    """
    version = get_task(family).scorer_version
    return {"scorer_version": version} if version else {}


def eval_benchmark_params(wildcards):
    """benchmark_params, with `greedy` in each decoding under evaluation.greedy (a greedy sample beside
    the sampled ones); the key is absent otherwise, so configs without it keep their params and results.
    """
    params = benchmark_params(wildcards)
    if config["evaluation"]["greedy"]:
        for b in params:
            b["decoding"] = {**b["decoding"], "greedy": True}
    return params


def base_benchmark_params(wildcards):
    """eval_benchmark_params of the base model: evaluation.base_pass_k samples on the task's first
    benchmark (its pass@k at large k); unchanged when it is null."""
    params = eval_benchmark_params(wildcards)
    k = config["evaluation"]["base_pass_k"]
    if k is not None:
        params[0]["decoding"] = {**params[0]["decoding"], "n_samples": k}
    return params


def task_benchmarks(task, base):
    """A task's benchmark params as its base model's (base) or its runs' evaluate jobs get them."""
    wildcards = SimpleNamespace(task=task)
    return (base_benchmark_params if base else eval_benchmark_params)(wildcards)


# GPU-hours of every job's work per model, beside the memory plan (a GPU config's `snakemake -n`)
if workflow.is_main_process:
    job_time.print_gpu_hours(config, task_benchmarks, PROBED_TASKS)


def sft_files(wildcards):
    return [
        data_file(r) for r in config["models"][wildcards.model]["build"]["sft_from"]
    ]


def held_out_files(wildcards):
    """Every other split of the warm-start datasets, to prove the warm-start data is disjoint."""
    sft = config["models"][wildcards.model]["build"]["sft_from"]
    datasets = sorted({ref.split("/", 1)[0] for ref in sft})
    return [
        data_file(f"{d}/{s}")
        for d in datasets
        for s in config["datasets"][d]["splits"]
        if f"{d}/{s}" not in sft
    ]


# ---- a sequential design (seeds: {first, batch, max}; hardex.sequential, rules/sequential.smk) ----
# Every run trains the first batch of seeds; the checkpoint sequential_look then reads the evaluations and
# names the runs of the comparisons still undecided, which alone train the next batch, until every deciding
# comparison is decided or the design's maximum is reached. Reading a look that has not run yet stops
# planning there: Snakemake plans again once the checkpoint has run.
DECIDING = (
    deciding_comparisons(RUN_STRATEGIES, config["seeds"].get("deciding"))
    if DESIGN
    else []
)
CELLS = [(m, t) for m in MODELS for t in model_tasks(config, m)]


def runs_after_look(look):
    """{(model, task): run strategies} that train the batch after look `look` (its checkpoint's output)."""
    record = json.loads(
        Path(checkpoints.sequential_look.get(look=look).output[0]).read_text()
    )
    return {
        (m, t): runs
        for m, tasks in record["needs_seeds"].items()
        for t, runs in tasks.items()
    }


def design_runs(batches=None):
    """(model, task, strategy, seed) of every run the first `batches` batches train (by default the whole
    design's: until a look leaves no run needing seeds, or the maximum)."""
    runs, needed, bounds = [], {c: RUN_STRATEGIES for c in CELLS}, [0] + DESIGN.looks
    for k in range(1, (batches or len(DESIGN.looks)) + 1):
        if k > 1:
            needed = runs_after_look(k - 1)
            if not any(needed.values()):
                break
        runs += [
            (m, t, s, seed)
            for (m, t), strategies in needed.items()
            for s in strategies
            for seed in range(bounds[k - 1], bounds[k])
        ]
    return runs


def last_look():
    """The look after which no run trains more seeds: every comparison decided, or the design's maximum."""
    look = 1
    while look < len(DESIGN.looks) and any(runs_after_look(look).values()):
        look += 1
    return look


def design_files(template, batches=None):
    """`template` filled for every run of the design (up to `batches` batches; all of them by default)."""
    return [
        layout.fill(template, model=m, task=t, strategy=s, seed=seed)
        for m, t, s, seed in design_runs(batches)
    ]


def look_evals(wildcards):
    """What look k reads: the evaluations of every run the first k batches trained."""
    return design_files(layout.EVAL_RUN, int(wildcards.look))


def last_look_file(wildcards):
    return layout.fill(layout.LOOK, look=last_look())


# ---- report: what the report rules read, and which settings reach which rule (hardex.report.plan) ----


REPORT = config["report"]
# a reference that does not exist is a config mistake: stop before any job is planned
REFERENCE_FILE = report_plan.reference_files_or_exit(config)
# every table, figure and the regression of the config's report (the sequential design's verdicts too)
REPORT_TARGETS = report_plan.report_targets(config)

BASE_FILES = every(layout.EVAL_BASE)
PROBE_FILES = every(layout.PROBE)
OVERLAP_FILES = every(layout.OVERLAP)
BUILT_MODEL_DIRS = every(layout.MODEL, model=BUILT_MODELS)

if DESIGN:
    # a sequential design's runs: what the looks decided, planned again after each look (input functions)

    def EVAL_FILES(wildcards):
        return design_files(layout.EVAL_RUN)

    def STEPS_FILES(wildcards):
        return design_files(layout.STEPS)

    def design_subsets(batches=None):
        """The subsets the design's runs train on (of its first `batches` batches; all by default)."""
        return sorted(
            {
                layout.fill(
                    layout.SUBSET,
                    model=m,
                    task=t,
                    strategy=RunName.parse(s).strategy,
                    seed=seed,
                )
                for m, t, s, seed in design_runs(batches)
            }
        )

    def SUBSET_FILES(wildcards):
        return design_subsets()

    # the first batch's subsets exist before any run trains: what a prediction from the probe alone reads
    # (the whole design's would wait for every look, and so for the first batch's training)
    FIRST_SUBSET_FILES = design_subsets(1)

else:
    EVAL_FILES = every(layout.EVAL_RUN)
    STEPS_FILES = every(layout.STEPS)
    SUBSET_FILES = FIRST_SUBSET_FILES = every(layout.SUBSET, strategy=STRATEGIES)


# the params the report rules share: the captions' provenance, benchmarks and pass@k, the statistics' settings,
# each model's G, the figures' style and a rehearsal's banner
PROVENANCE = report_plan.provenance(config, workflow.config_settings.configfiles)
BENCHMARKS = report_plan.benchmarks(config)
PASS_K = report_plan.pass_k(config)
RESCORING = report_plan.rescoring(config)
STATS = report_plan.stats(config)
GROUP_SIZES = report_plan.group_sizes(config)
BANNER = report_plan.banner(config)
STYLE = report_plan.figure_style(config)


def table_output(name, title):
    """The table's HTML page, in the HTML report."""
    return report_plan.table_output(name, title, report_entry)


def figure_outputs(names):
    """Each figure's PNG, in the HTML report with its caption and label, and its other formats."""
    return report_plan.figure_outputs(config, names, report_entry)


STARTED = time.time()


def announce_headline():
    """At the end of a run that rebuilt the headline table, print it: the answer the run was for."""
    text = fresh_headline(layout.fill(layout.TABLE, name="headline", ext="md"), STARTED)
    if text:
        print(text, file=sys.stderr)
