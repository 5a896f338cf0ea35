"""The Slurm partitions a run asks for, read as Snakemake's own command line parses a profile, and checked
against a cluster's (hardex.cluster, issue 46 item 5). tests/workflow/test_slurm.py checks them against a
real single-node Slurm; here `sinfo` is absent, fails, or is a script printing what sinfo prints."""

from __future__ import annotations

import sys

import pytest
import yaml

from hardex.cluster import (
    PartitionsUnknown,
    cluster_gpu_types,
    cluster_partitions,
    default_partition,
    gpu_model_error,
    misspelt_resources,
    partition_error,
    requested_gpu_models,
    requested_partitions,
)
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
def test_the_clusters_partitions_without_the_default_marker_the_default_first(tmp_path, monkeypatch):
    _sinfo(tmp_path, monkeypatch, 'echo gpu; echo "debug*"; echo gpu')
    assert cluster_partitions() == ["debug", "gpu"] and default_partition() == "debug"


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands for sinfo")
def test_the_clusters_gpu_types_from_its_nodes_generic_resources(tmp_path, monkeypatch):
    """sinfo -o %G prints one line per node group: typed GPUs (with a socket binding or not), untyped ones, other
    generic resources, and (null) for none."""
    _sinfo(tmp_path, monkeypatch, 'echo "(null)"; echo "gpu:a100:4(S:0-1)"; echo "gpu:h100:8,shard:16"; '
                                  'echo "gpu:2"; echo "gpu:a100:2"')
    assert cluster_gpu_types() == (["a100", "h100"], ["gpu:2"])


def test_a_gpu_type_is_read_from_each_rule_as_a_job_would_see_it(tmp_path):
    profile = {"executor": "slurm", "default-resources": {"slurm_partition": "gpu"},
               "set-resources": {"train": {"gpu_model": "h100"}, "probe": {"gpu_model": "'a100'"}}}
    assert sorted(requested_gpu_models(*parsed(tmp_path, profile))) == [
        ("set-resources: probe: gpu_model", "a100"), ("set-resources: train: gpu_model", "h100")]


def test_the_gpu_type_error_says_what_the_cluster_has():
    asked = [("set-resources: train: gpu_model", "h100")]
    assert gpu_model_error(asked, ["h100", "a100"], []) is None
    assert gpu_model_error(asked, ["a100"], ["gpu:2"]) == (
        "set-resources: train: gpu_model 'h100': not a GPU type of this cluster; its types (sinfo's GRES): a100")
    assert "carry no type (sinfo's GRES: gpu:2)" in gpu_model_error(asked, [], ["gpu:2"])
    assert gpu_model_error(asked, [], []) == (
        "set-resources: train: gpu_model 'h100': this cluster reports no GPU (sinfo's GRES lists none)")


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
