"""The Slurm partitions and GPU types a run asks for, checked against the cluster's at planning time, and its
resource keys against those the Slurm executor reads.

Under the Slurm executor (`--executor slurm`, profiles/slurm) every `slurm_partition` resource becomes
sbatch's `-p`. Slurm refuses an unknown partition only when a job is submitted, which may be hours into a
run (the report's rules run locally, the train jobs late), so planning checks each one the profile or the
command line gives (default-resources, and set-resources per rule) against `sinfo`, and each `gpu_model`
(the plugin's `--gpus=TYPE:N`) against the GPU types the nodes' GRES report; a run naming no partition is
told which one its jobs go to. A cluster whose `sinfo` is missing or fails is said once and not checked.
"""

from __future__ import annotations

import asyncio
import difflib
import shutil
import subprocess
import sys
from typing import Any, Mapping

#: seconds sinfo may take (a busy controller answers in well under one)
SINFO_TIMEOUT_S = 30
PARTITION = "slurm_partition"
GPU_MODEL = "gpu_model"


#: the resources the Slurm executor plugin reads (snakemake-executor-plugin-slurm's sources) and Snakemake's own: a
#: profile key near one of these but not it (slurm_partiton) is a typo, which Snakemake would keep as a resource of
#: its own on every job, and the plugin would not read
SLURM_RESOURCES = ("slurm_partition", "slurm_account", "slurm_extra", "slurm_cluster", "clusters", "constraint",
                   "cpus_per_task", "cpus_per_gpu", "gpu", "gpu_model", "gres", "mem_mb", "mem_mb_per_cpu", "mpi",
                   "nodes", "qos", "runtime", "tasks", "tasks_per_gpu", "tasks_per_node", "threads",
                   "mem", "mem_gb", "mem_mib", "mem_gib", "disk", "disk_mb", "disk_mib", "disk_gb", "tmpdir")


def _resource_sources(default_resources: Mapping | None, overwrite_resources: Mapping[str, Mapping] | None
                      ) -> list[tuple[str, str | None, Mapping]]:
    """(where, rule or None, resources) for default-resources and each rule's set-resources, as Snakemake parsed
    them (its ResourceSettings: `workflow.resource_settings`)."""
    return [("default-resources", None, default_resources or {}),
            *((f"set-resources: {rule}", rule, res) for rule, res in (overwrite_resources or {}).items())]


def misspelt_resources(default_resources: Mapping | None,
                       overwrite_resources: Mapping[str, Mapping] | None) -> list[str]:
    """'<where>: <key> (did you mean <known>?)' for each resource key of default-resources and set-resources that
    is close to one the Slurm executor reads but is not one (a site's own resource names stay allowed)."""
    found = []
    for where, _, resources in _resource_sources(default_resources, overwrite_resources):
        for key in resources.keys():
            if key in SLURM_RESOURCES or key.startswith("_"):
                continue
            if near := difflib.get_close_matches(key, SLURM_RESOURCES, n=1, cutoff=0.85):
                found.append(f"{where}: {key} (did you mean {near[0]}?)")
    return found


class PartitionsUnknown(Exception):
    """The cluster's partitions cannot be read (no sinfo, or it failed)."""


def snakemake_executor() -> str | None:
    """The executor Snakemake's command line asks for (`--executor`, or a profile's `executor:`), or None where
    Snakemake was not started from its command line. Snakemake hands the workflow its executor only once it
    executes, after reading the Snakefile, and a dry run's is `dryrun`: the intended one is read from the
    arguments its command line parsed (snakemake.cli.args_to_api's `args`), up the call stack."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "args_to_api" and frame.f_globals.get("__name__") == "snakemake.cli":
            return getattr(frame.f_locals.get("args"), "executor", None)
        frame = frame.f_back
    return None


def _value(resource: Any, rule: str | None) -> Any:
    """A resource's value as a job of `rule` would see it (a profile's value is a Python expression, and a
    bare word a string); None where it depends on a job's wildcards or input, unknown while planning."""
    if not hasattr(resource, "evaluate"):  # a plain value (Snakemake's Python API)
        return resource
    try:
        return resource.evaluate(None, input=[], attempt=1, threads=1, rulename=rule or "",
                                 async_run=asyncio.run).value
    except Exception:
        return None


def requested_partitions(default_resources: Mapping | None,
                         overwrite_resources: Mapping[str, Mapping] | None) -> list[tuple[str, str]]:
    """(key, partition) of every slurm_partition in default-resources and in set-resources per rule
    (`_resource_sources`); a value may list several, comma-separated, as sbatch's -p does."""
    found = []
    for where, rule, resources in _resource_sources(default_resources, overwrite_resources):
        if PARTITION not in resources:
            continue
        value = _value(resources[PARTITION], rule)
        for name in str(value or "").split(","):
            if name.strip():
                found.append((f"{where}: {PARTITION}", name.strip()))
    return found


def _sinfo(field: str) -> list[str]:
    """The non-empty lines of `sinfo -h -o <field>`; PartitionsUnknown where sinfo is missing or fails."""
    if shutil.which("sinfo") is None:
        raise PartitionsUnknown("no sinfo on this machine")
    try:
        res = subprocess.run(["sinfo", "-h", "-o", field], capture_output=True, text=True, timeout=SINFO_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PartitionsUnknown(f"sinfo failed: {e}") from None
    if res.returncode != 0:
        why = (res.stderr.strip().splitlines() or [f"exit code {res.returncode}"])[-1]
        raise PartitionsUnknown(f"sinfo failed: {why}")
    return [line.strip() for line in res.stdout.splitlines() if line.strip()]


def cluster_partitions() -> list[str]:
    """The cluster's partitions (`sinfo -h -o %P`), the default one first, its `*` marker stripped."""
    lines = _sinfo("%P")
    if not lines:
        raise PartitionsUnknown("sinfo lists no partition")
    ordered = [line for line in lines if line.endswith("*")] + [line for line in lines if not line.endswith("*")]
    return list(dict.fromkeys(line.rstrip("*") for line in ordered))


def default_partition() -> str | None:
    """The partition a job that names none goes to (sinfo's `*`), or None where the cluster marks none."""
    return next((line.rstrip("*") for line in _sinfo("%P") if line.endswith("*")), None)


def requested_gpu_models(default_resources: Mapping | None,
                         overwrite_resources: Mapping[str, Mapping] | None) -> list[tuple[str, str]]:
    """(key, GPU type) of every gpu_model in default-resources and in set-resources per rule."""
    found = []
    for where, rule, resources in _resource_sources(default_resources, overwrite_resources):
        if GPU_MODEL in resources and (value := _value(resources[GPU_MODEL], rule)):
            found.append((f"{where}: {GPU_MODEL}", str(value).strip().strip("'\"")))
    return found


def cluster_gpu_types() -> tuple[list[str], list[str]]:
    """(the GPU types the cluster's nodes report, the GRES entries of GPUs without a type) from `sinfo -h -o %G`:
    `gpu:h100:8(S:0-1)` is typed h100, `gpu:8` untyped, `(null)` no GPU."""
    types, untyped = [], []
    for line in _sinfo("%G"):
        for entry in line.split(","):
            parts = entry.split("(")[0].strip().split(":")
            if parts[0] != "gpu":
                continue
            if len(parts) >= 3:
                types.append(parts[1])
            else:
                untyped.append(entry.strip())
    return list(dict.fromkeys(types)), list(dict.fromkeys(untyped))


def gpu_model_error(requested: list[tuple[str, str]], types: list[str], untyped: list[str]) -> str | None:
    """One line naming each key whose GPU type the cluster does not report (sbatch would refuse its jobs at
    submission, hours in), with the types it does; None if every one is there."""
    missing = [f"{key} {name!r}" for key, name in requested if name not in types]
    if not missing:
        return None
    if types:
        return f"{', '.join(missing)}: not a GPU type of this cluster; its types (sinfo's GRES): {', '.join(types)}"
    if untyped:
        return (f"{', '.join(missing)}: this cluster's GPUs carry no type (sinfo's GRES: {', '.join(untyped)}), so "
                f"sbatch refuses any --gpus=TYPE:N; leave gpu_model out")
    return f"{', '.join(missing)}: this cluster reports no GPU (sinfo's GRES lists none)"


def partition_error(requested: list[tuple[str, str]], known: list[str]) -> str | None:
    """One line naming each key whose partition the cluster lacks, and the cluster's partitions; None if none."""
    missing = [f"{key} {name!r}" for key, name in requested if name not in known]
    if not missing:
        return None
    what = "is not a partition" if len(missing) == 1 else "are not partitions"
    return f"{', '.join(missing)} {what} of this cluster; its partitions (sinfo): {', '.join(known)}"


def check_partitions_or_exit(resource_settings, executor: str | None) -> None:
    """For the Snakefile: under the Slurm executor, a misspelt resource key, or a slurm_partition the cluster
    lacks, prints one line and exits
    before any job is planned; a cluster whose partitions cannot be read is said in one notice."""
    if executor != "slurm":
        return
    if typos := misspelt_resources(resource_settings.default_resources, resource_settings.overwrite_resources):
        print(f"hardex: slurm error: {'; '.join(typos)}: the Slurm executor reads no such resource", file=sys.stderr)
        sys.exit(1)
    resources = (resource_settings.default_resources, resource_settings.overwrite_resources)
    requested = requested_partitions(*resources)
    gpu_models = requested_gpu_models(*resources)
    try:
        known, default = cluster_partitions(), default_partition()
        types, untyped = cluster_gpu_types() if gpu_models else ([], [])
    except PartitionsUnknown as e:
        print(f"hardex: notice: Slurm partitions and GPU types not checked ({e})", file=sys.stderr)
        return
    if not requested:
        print(f"hardex: notice: no slurm_partition in the profile or on the command line: every job goes to the "
              f"cluster's default partition ({default or 'sinfo marks none'}; its partitions: {', '.join(known)}; "
              f"profiles/README.md)", file=sys.stderr)
    error = partition_error(requested, known) or gpu_model_error(gpu_models, types, untyped)
    if error:
        print(f"hardex: slurm error: {error}", file=sys.stderr)
        sys.exit(1)
