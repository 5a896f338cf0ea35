"""A Slurm partition or GPU type the cluster lacks is refused at planning, and a run naming no partition told
where its jobs go, through Snakemake's own CLI (issue 46, item 5; issue 61, item 4).

Here `sinfo` is a script that prints what a cluster's sinfo prints (or fails as one without a controller
does), so the check runs without root; tests/workflow/test_slurm.py checks it against a real single-node Slurm.
A dry run submits nothing: `--executor slurm -n` plans as the Slurm executor would, without a cluster."""

from __future__ import annotations

import copy
import os

import pytest

from tests.support import snakemake, write_config

pytestmark = pytest.mark.skipif(os.name != "posix", reason="a shell script stands for sinfo")


@pytest.fixture
def cluster_bin(tmp_path, monkeypatch):
    """A folder first on PATH: write_sinfo(script) puts a `sinfo` there, beside a `squeue` (the Slurm plugin will
    not import where sinfo is and neither squeue nor sacct: a machine without Slurm's client tools installed)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "squeue").write_text("#!/bin/sh\nexit 0\n")
    (folder / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")

    def write_sinfo(script: str) -> None:
        (folder / "sinfo").write_text(f"#!/bin/sh\n{script}\n")
        (folder / "sinfo").chmod(0o755)

    return write_sinfo


def dry_run(tmp_path, smoke_config, *args):
    workdir = tmp_path / "run"
    workdir.mkdir(exist_ok=True)
    cfg = copy.deepcopy(smoke_config)
    res = snakemake(workdir, "-n", *args, configfile=write_config(workdir, cfg), timeout=300)
    return res, res.stdout + res.stderr, workdir


def test_a_misspelt_partition_is_refused_naming_its_key_and_the_clusters(tmp_path, smoke_config, cluster_bin):
    cluster_bin('echo "debug*"; echo gpu')
    res, out, workdir = dry_run(tmp_path, smoke_config, "--executor", "slurm", "--jobs", "4",
                                "--set-resources", "train:slurm_partition=gpu", "probe:slurm_partition=gpuu")
    assert res.returncode != 0
    errors = [line for line in out.splitlines() if line.startswith("hardex: slurm error")]
    assert errors == ["hardex: slurm error: set-resources: probe: slurm_partition 'gpuu' is not a partition of this "
                      "cluster; its partitions (sinfo): debug, gpu"], out[-3000:]
    assert not (workdir / "results").exists()
    # the cluster's partitions, the default one (debug*) among them, pass
    res, out, _ = dry_run(tmp_path, smoke_config, "--executor", "slurm", "--jobs", "4", "--default-resources",
                          "slurm_partition=debug", "--set-resources", "train:slurm_partition=gpu")
    assert res.returncode == 0, out[-3000:]
    assert "hardex: slurm error" not in out and "Job stats" in out


def test_a_cluster_whose_partitions_cannot_be_read_is_said_once_and_planning_goes_on(tmp_path, smoke_config,
                                                                                      cluster_bin):
    cluster_bin('echo "sinfo: error: Unable to contact slurm controller (connect failure)" >&2; exit 1')
    res, out, _ = dry_run(tmp_path, smoke_config, "--executor", "slurm", "--jobs", "4",
                          "--set-resources", "train:slurm_partition=gpuu")
    assert res.returncode == 0, out[-3000:]
    notices = [line for line in out.splitlines() if "not checked" in line]
    assert notices == ["hardex: notice: Slurm partitions and GPU types not checked (sinfo failed: sinfo: error: Unable "
                       "to contact slurm controller (connect failure))"]


def test_without_the_slurm_executor_partitions_are_not_checked(tmp_path, smoke_config, cluster_bin):
    cluster_bin("echo called >> \"$0.log\"; echo debug")
    res, out, _ = dry_run(tmp_path, smoke_config, "--cores", "1", "--set-resources", "train:slurm_partition=gpuu")
    assert res.returncode == 0, out[-3000:]
    assert "slurm" not in "\n".join(line for line in out.splitlines() if line.startswith("hardex:"))
    assert not (tmp_path / "bin" / "sinfo.log").exists()  # sinfo was never asked


# what sinfo prints for its partitions (%P) and each node group's generic resources (%G)
TYPED_CLUSTER = 'case "$3" in %P) echo "debug*"; echo gpu;; %G) echo "(null)"; echo "gpu:a100:4(S:0-1)";; esac'
UNTYPED_CLUSTER = 'case "$3" in %P) echo "debug*"; echo gpu;; %G) echo "(null)"; echo "gpu:4";; esac'


@pytest.mark.parametrize("sinfo, error", [
    (TYPED_CLUSTER, "set-resources: train: gpu_model 'h100': not a GPU type of this cluster; its types (sinfo's "
                    "GRES): a100"),
    (UNTYPED_CLUSTER, "set-resources: train: gpu_model 'h100': this cluster's GPUs carry no type (sinfo's GRES: "
                      "gpu:4), so sbatch refuses any --gpus=TYPE:N; leave gpu_model out"),
])
def test_a_gpu_type_the_cluster_lacks_is_refused_naming_its_key(tmp_path, smoke_config, cluster_bin, sinfo, error):
    """sbatch refused such a job only when it was submitted, hours into the run (issue 61)."""
    cluster_bin(sinfo)
    res, out, workdir = dry_run(tmp_path, smoke_config, "--executor", "slurm", "--jobs", "4", "--default-resources",
                                "slurm_partition=gpu", "--set-resources", "train:gpu_model=h100")
    errors = [line for line in out.splitlines() if line.startswith("hardex: slurm error")]
    assert res.returncode != 0 and errors == [f"hardex: slurm error: {error}"], out[-3000:]
    assert not (workdir / "results").exists()
    res, out, _ = dry_run(tmp_path, smoke_config, "--executor", "slurm", "--jobs", "4", "--default-resources",
                          "slurm_partition=gpu", "--set-resources", "train:gpu_model=a100")
    assert res.returncode == (0 if sinfo == TYPED_CLUSTER else 1), out[-3000:]


def test_a_run_naming_no_partition_is_told_where_its_jobs_go(tmp_path, smoke_config, cluster_bin):
    cluster_bin(TYPED_CLUSTER)
    res, out, _ = dry_run(tmp_path, smoke_config, "--executor", "slurm", "--jobs", "4")
    assert res.returncode == 0, out[-3000:]
    notices = [line for line in out.splitlines() if "slurm_partition" in line and line.startswith("hardex:")]
    assert notices == ["hardex: notice: no slurm_partition in the profile or on the command line: every job goes to "
                       "the cluster's default partition (debug; its partitions: debug, gpu; profiles/README.md)"]
