"""The conda envs of the stages pin versions that pyproject.toml's ranges admit, and every rule uses one."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from packaging.requirements import Requirement

from tests.support import ROOT

ENVS = sorted((ROOT / "envs").glob("*.yaml"))


def project_requirements() -> dict[str, Requirement]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"]) + [r for extra in meta["optional-dependencies"].values() for r in extra]
    return {Requirement(r).name.lower(): Requirement(r) for r in reqs}


def pins(env_file) -> dict[str, str]:
    pip = next(d["pip"] for d in yaml.safe_load(env_file.read_text())["dependencies"] if isinstance(d, dict))
    out = {}
    for line in pip:
        name, version = line.split("==")
        out[name.lower()] = version
    return out


@pytest.mark.parametrize("env_file", ENVS, ids=[e.stem for e in ENVS])
def test_env_pins_lie_in_pyproject_ranges(env_file):
    reqs = project_requirements()
    for name, version in pins(env_file).items():
        assert name in reqs, f"{env_file.name}: {name} is pinned but is no dependency in pyproject.toml"
        assert reqs[name].specifier.contains(version, prereleases=True), (
            f"{env_file.name}: {name}=={version} is outside pyproject.toml's {reqs[name]}"
        )


def test_envs_cover_the_stages():
    assert {e.stem for e in ENVS} == {"generation", "training", "analysis"}


def test_every_rule_names_an_env_and_lint_is_clean():
    res = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=ROOT, capture_output=True, text=True)
    assert "Congratulations, your workflow is in a good condition!" in res.stdout + res.stderr, res.stdout[-3000:]
    used = set(re.findall(r'"\.\./envs/(\w+)\.yaml"', "".join(p.read_text() for p in (ROOT / "rules").glob("*.smk"))))
    assert used == {"generation", "training", "analysis"}


def test_snakefmt_check_passes():
    res = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
