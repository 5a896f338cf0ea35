# The config, loaded and checked before any job is planned; wildcard constraints, input functions and thin wrappers
# over the library. Every value that changes a result reaches its rule through params (Snakemake tracks only those).
import functools
import os
import sys
import time

# a bare `report(` at the start of a line opens the global `report:` keyword: import it as another name
from snakemake.io import report as report_entry

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from hardex import layout
from hardex.config import check_or_exit
from hardex.controls import control_notices
from hardex.settings import (
    benchmark_settings,
    generation_settings,
    imported_rates,
    model_settings,
    probe_settings,
    run_grpo_settings,
    run_strategies,
    sampling_notices,
    seed_design,
    seed_list,
    select_settings,
    split_source,
    split_spec,
    trained_run_dirs,
    unlearnable_allowed,
    warmstart_files,
)
from hardex.architectures import KEPT as ARCHITECTURES
from hardex import job_resources, job_time, study_runs
from hardex.checkpoints import lost_by_length
from hardex.cluster import check_partitions_or_exit, snakemake_executor
from hardex.memory_plan import check_plan_or_exit
from hardex.gpu_packages import check_packages_or_exit, conda_env
from hardex.model_sources import gguf_file
from hardex.io import file_sha256
from hardex.fetch import offline_jobs
from hardex.report import plan as report_plan
from hardex.selection import RunName
from hardex.report.tables import TABLES
from hardex.report.recommend import TITLE as RECOMMEND_TITLE
from hardex.report.headline import fresh_headline
from hardex.reward_hook import WORKFLOW_DIR_VARIABLE

# a reward hook's relative file is read from the workflow's directory, at planning and in every job (inherited)
os.environ[WORKFLOW_DIR_VARIABLE] = workflow.basedir

config = check_or_exit(
    config,
    workflow.config_settings.configfiles or [Path(workflow.basedir) / "config.yaml"],
)

MODELS = list(config["models"])
# models whose folder (layout.MODEL) the workflow makes, by path, and the job that makes it (built, converted from
# a GGUF file, or a rehearsal's stand-in). Their jobs depend on the folder; the others load a hub id or a directory.
MADE_BY = layout.MADE_BY
BUILT_MODELS = [m for m in MODELS if config["models"][m]["path"] in MADE_BY]
TASKS = list(config["tasks"])
# tasks whose pass rates come from a file (tasks.<task>.probe.from: rule probe_from_file), not from probing
IMPORTED_RATES = imported_rates(config)
PROBED_TASKS = [t for t in TASKS if t not in IMPORTED_RATES]
# each a training run: the subsets', <strategy>_online and <strategy>_<control>
RUN_STRATEGIES = run_strategies(config)
# every seed a run may train with; under a sequential design (seeds: {first, batch, max}) the looks decide
# which runs train which of them (rules/sequential.smk)
SEEDS = seed_list(config)
DESIGN = seed_design(config)

# every GPU job's memory, estimated from its model's architecture and settings: a plan that cannot fit
# compute.gpu_memory_gb stops here, before any job runs (the estimates print with `snakemake -n`)
check_plan_or_exit(config, show=workflow.is_main_process)
if workflow.is_main_process:
    # under the Slurm executor, a slurm_partition (default-resources, set-resources) the cluster lacks stops here
    check_partitions_or_exit(workflow.resource_settings, snakemake_executor())
    # a job that asks more GPUs than --resources gpu=N would be run on N by Snakemake, its ranks sharing them
    granted = job_time.granted_gpus(workflow.resource_settings)
    if short := job_time.gpu_shortfall(config, granted):
        sys.exit(f"hardex: config error: {short}")
    # a probe that samples otherwise than GRPO, or a shuffled control on a choice task, is allowed, and said
    for line in sampling_notices(config) + control_notices(config):
        print(f"hardex: notice: {line}", file=sys.stderr)
    # jobs run with the hub offline when the local cache holds every hub model and dataset of the config (local
    # jobs inherit the variables, Slurm's through --export=ALL, other executors' as envvars); else a notice says
    # what to fetch with hardex-fetch (hardex.fetch)
    hub = offline_jobs(config, workflow.config_settings.configfiles)
    workflow.register_envvars(*hub.variables)
    for line in hub.notices:
        print(f"hardex: notice: {line}", file=sys.stderr)
    # a new run length alone (max_steps, epochs) without grpo.schedule_steps would delete trained runs'
    # checkpoints and train them from the base model: refused here, before any job
    if lost := lost_by_length(trained_run_dirs(config, RUN_STRATEGIES, SEEDS)):
        sys.exit(f"hardex: config error: {lost}")
    # the optional packages the config's GPU settings need (bitsandbytes, deepspeed, vllm): a run stops here
    # without them, a dry run shows them (here, or under `--sdm conda` in the environments its jobs will use;
    # `conda` may not open a line here: Snakemake would read its keyword)
    in_conda_envs = "conda" in map(str, workflow.deployment_settings.deployment_method)
    check_packages_or_exit(config, in_conda_envs)
    # GPU-hours of every job's work per model, beside the memory plan (a GPU config's `snakemake -n`)
    job_time.print_gpu_hours(
        config, functools.partial(benchmark_settings, config), PROBED_TASKS
    )


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


def run_subset(wildcards):
    """The subset a run trains on: its strategy's, an online or a control run's too (RunName.strategy)."""
    strategy = RunName.parse(wildcards.strategy).strategy
    return layout.fill(layout.SUBSET, **dict(wildcards.items(), strategy=strategy))


def strategy_setting(name):
    """A select job's param: setting `name` where its strategy reads it, else None (settings.select_settings)."""
    return lambda wildcards: select_settings(
        config, wildcards.model, wildcards.task, wildcards.strategy
    )[name]


def pool_file(wildcards):
    return layout.data_file(config["tasks"][wildcards.task]["pool"])


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


# each model job's threads, GPUs, host memory and runtime, by job kind (hardex.job_resources)
MODEL_JOB = job_resources.model_job(config)
PROBE_JOB = job_resources.probe_job(config)
TRAIN_JOB = job_resources.train_job(config)
EVALUATE_BASE_JOB = job_resources.evaluate_base_job(config)
EVALUATE_RUN_JOB = job_resources.evaluate_run_job(config)

# `--sdm conda` environments, chosen by what the config's jobs ask for (hardex.gpu_packages.conda_env)
GENERATION_ENV = f"../envs/{conda_env(config)}.yaml"


def training_env(wildcards):
    return f"../envs/{conda_env(config, wildcards.model)}.yaml"


def every(template, **fields):
    """The template filled with every model, task, run strategy and seed it names (`fields` narrows them)."""
    return study_runs.grid_files(config, template, **fields)


def benchmark_inputs(wildcards):
    return [layout.data_file(b) for b in config["tasks"][wildcards.task]["benchmarks"]]


def eval_benchmark_params(wildcards):
    return benchmark_settings(config, wildcards.task)


def base_benchmark_params(wildcards):
    return benchmark_settings(config, wildcards.task, base=True)


def warmstart(kind):
    """A build job's input: its warm-start files (sft) or the splits proved disjoint from them (held_out)."""
    return lambda wildcards: warmstart_files(config, wildcards.model)[kind]


# ---- a sequential design (seeds: {first, batch, max}; hardex.study_runs, rules/sequential.smk) ----
DECIDING = study_runs.deciding(config)
CELLS = study_runs.cells(config)


def look_file(look):
    """Look `look`'s record, its checkpoint's output: one not run yet stops planning until it has."""
    return checkpoints.sequential_look.get(look=look).output[0]


def look_evals(wildcards):
    """What look k reads: the evaluations of every run the first k batches trained."""
    return study_runs.design_files(
        config, layout.EVAL_RUN, look_file, int(wildcards.look)
    )


def last_look_file(wildcards):
    return layout.fill(layout.LOOK, look=study_runs.last_look(config, look_file))


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

# every run's files: the grid's, or a sequential design's as its looks decide (input functions then)
EVAL_FILES = study_runs.run_files(config, layout.EVAL_RUN, look_file)
STEPS_FILES = study_runs.run_files(config, layout.STEPS, look_file)
SUBSET_FILES = study_runs.subset_files(config, look_file)
FIRST_SUBSET_FILES = study_runs.subset_files(config, look_file, first_batch=True)


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
