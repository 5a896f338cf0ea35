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
    assert {e.stem for e in ENVS} == {"generation", "training", "analysis", "vllm"}


def test_lint_is_clean():
    res = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=ROOT, capture_output=True, text=True)
    assert "Congratulations, your workflow is in a good condition!" in res.stdout + res.stderr, res.stdout[-3000:]


def envs_in_use(tmp_path, *config: str) -> set[str]:
    """The environments the jobs of a config would run in, as Snakemake resolves them: `--containerize`
    names each one it hashes, before it asks for conda (absent here, so the command then fails)."""
    (tmp_path / "config.yaml").write_text((ROOT / "config.yaml").read_text())
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--containerize"]
    res = subprocess.run(cmd + (["--config", *config] if config else []), cwd=tmp_path, capture_output=True,
                         text=True)
    return set(re.findall(r"Hashing conda environment \S*envs/(\w+)\.yaml", res.stdout + res.stderr))


def test_every_job_has_its_stage_env_and_vllm_jobs_get_vllms(tmp_path):
    assert envs_in_use(tmp_path) == {"generation", "training", "analysis"}
    # data and model building stay in the generation env; probing, evaluation and training move
    assert envs_in_use(tmp_path, 'generation={"backend": "vllm"}', 'grpo={"rollouts": "vllm"}') == {
        "generation", "analysis", "vllm"}
    assert envs_in_use(tmp_path, 'grpo={"rollouts": "vllm"}') == {"generation", "analysis", "vllm"}


def test_vllm_post_deploy_script_parses_and_removes_what_breaks_transformers():
    script = ROOT / "envs" / "vllm.post-deploy.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    assert "pip uninstall -y torchvision torchaudio torchcodec" in script.read_text()


def test_snakefmt_check_passes():
    res = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
