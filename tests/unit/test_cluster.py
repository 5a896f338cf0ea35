"""The Slurm partitions a run asks for, read as Snakemake's own command line parses a profile, and checked
against a cluster's (hardex.cluster, issue 46 item 5). tests/workflow/test_slurm.py checks them against a
real single-node Slurm; here `sinfo` is absent, fails, or is a script printing what sinfo prints."""

from __future__ import annotations

import sys

import pytest
import yaml

from hardex.cluster import (PartitionsUnknown, cluster_partitions, misspelt_resources, partition_error,
                            requested_partitions)
from tests.support import ROOT


def parsed(tmp_path, profile: dict, *args: str):
    """Snakemake's parsed command line with this profile (its ResourceSettings' inputs)."""
    from snakemake.cli import parse_args

    folder = tmp_path / "profile"
    folder.mkdir(exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(profile))
    _, args = parse_args(["-s", str(ROOT / "Snakefile"), "--workflow-profile", "none", "--profile", str(folder),
                          "-n", *args])
    return args.default_resources, args.set_resources


def test_every_partition_of_a_profile_is_named_by_its_key(tmp_path):
    profile = {"executor": "slurm",
               "default-resources": {"mem_mb": "2000 * attempt", "slurm_partition": "cpu"},
               # a bare word, a quoted string and a list, as sbatch's -p takes one
               "set-resources": {"train": {"slurm_partition": "gpu", "runtime": 60},
                                 "probe": {"slurm_partition": "'gpu-short'"},
                                 "evaluate_run": {"slurm_partition": "gpu,gpu-short"}}}
    found = requested_partitions(*parsed(tmp_path, profile))
    assert sorted(found) == [("default-resources: slurm_partition", "cpu"),
                             ("set-resources: evaluate_run: slurm_partition", "gpu"),
                             ("set-resources: evaluate_run: slurm_partition", "gpu-short"),
                             ("set-resources: probe: slurm_partition", "gpu-short"),
                             ("set-resources: train: slurm_partition", "gpu")]


def test_a_profile_without_partitions_asks_for_none(tmp_path):
    profile = {"executor": "slurm", "default-resources": {"mem_mb": 2000}, "set-resources": {"train": {"runtime": 5}}}
    assert requested_partitions(*parsed(tmp_path, profile)) == []
    # the command line's set-resources as well
    assert requested_partitions(*parsed(tmp_path, profile, "--set-resources", "train:slurm_partition=gpu")) == [
        ("set-resources: train: slurm_partition", "gpu")]


def test_a_misspelt_resource_key_is_named_with_the_key_it_is_near(tmp_path):
    """slurm_partiton became a resource of its own on every job, and the plugin read none: every job went to the
    default partition. A site's own resource names (far from any the plugin reads) stay allowed."""
    profile = {"executor": "slurm",
               "default-resources": {"mem_mb": 2000, "slurm_partiton": "gpu", "licenses_matlab": 1},
               "set-resources": {"train": {"slurm_acount": "lab", "runtime": 60, "gpu_model": "h100"}}}
    assert misspelt_resources(*parsed(tmp_path, profile)) == [
        "default-resources: slurm_partiton (did you mean slurm_partition?)",
        "set-resources: train: slurm_acount (did you mean slurm_account?)"]
    assert misspelt_resources(*parsed(tmp_path, {"executor": "slurm", "default-resources": {
        "slurm_partition": "gpu", "slurm_account": "lab", "mem_mb_per_cpu": 100}})) == []


def test_the_error_names_each_missing_key_and_the_clusters_partitions():
    requested = [("default-resources: slurm_partition", "debug"), ("set-resources: train: slurm_partition", "debgu")]
    assert partition_error(requested, ["debug"]) == (
        "set-resources: train: slurm_partition 'debgu' is not a partition of this cluster; its partitions "
        "(sinfo): debug")
    assert partition_error(requested[:1], ["debug", "gpu"]) is None


def _sinfo(tmp_path, monkeypatch, script: str | None) -> None:
    """PATH holding only a `sinfo` of this script (None: no sinfo at all)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if script is not None:
        (bin_dir / "sinfo").write_text(f"#!/bin/sh\n{script}\n")
        (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands for sinfo")
def test_the_clusters_partitions_without_the_default_marker(tmp_path, monkeypatch):
    _sinfo(tmp_path, monkeypatch, 'echo "debug*"; echo gpu; echo gpu')
    assert cluster_partitions() == ["debug", "gpu"]


@pytest.mark.parametrize("script, why", [
    (None, "no sinfo on this machine"),
    ('echo "sinfo: error: Unable to contact slurm controller" >&2; exit 1',
     "sinfo failed: sinfo: error: Unable to contact slurm controller"),
])
def test_a_cluster_that_cannot_be_read_is_said(tmp_path, monkeypatch, script, why):
    _sinfo(tmp_path, monkeypatch, script)
    with pytest.raises(PartitionsUnknown) as err:
        cluster_partitions()
    assert str(err.value) == why
