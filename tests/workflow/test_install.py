"""hardex installed from its wheel, not run from the checkout (issue 47): the config schema travels as package
data, the commands find the workflow in the folder they run in, and the task layer imports nothing above it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.support import ROOT

#: run by the installed hardex, in the checkout: what a user of `pip install .` does first
INSTALLED = r"""
import sys
from pathlib import Path

site, rehearsal = Path(sys.argv[1]).resolve(), sys.argv[2]
from hardex.tasks import get_task

get_task("addition", "rehearsal+lenient").is_correct("\\boxed{3}", "3", "1 + 2?")  # a rehearsal's scorer, built
assert not [m for m in sys.modules if m.startswith("hardex.rehearsal")], "hardex.tasks imports hardex.rehearsal"
import hardex

assert Path(hardex.__file__).resolve().is_relative_to(site), f"hardex imported from {hardex.__file__}, not {site}"
from hardex.schema import SCHEMA, schema_defaults

assert SCHEMA.resolve().is_relative_to(site), f"the schema is read from {SCHEMA}, not the installed package"
assert schema_defaults("grpo")["num_generations"] > 1
from hardex.rehearsal import main

sys.exit(main(["--quick", "experiments/cpu_tiny.yaml", "--dir", rehearsal, "-n"]))
"""


def run(*cmd, **kw):
    return subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=300, **kw)


@pytest.mark.slow
def test_a_wheel_installed_elsewhere_reads_its_schema_and_plans_a_rehearsal_in_the_checkout(tmp_path):
    pytest.importorskip("setuptools", reason="the wheel is built with the environment's setuptools (no network)")
    source = tmp_path / "source"  # a copy: building in the checkout would leave build/ and egg-info there
    (source / "src").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src" / "hardex", source / "src" / "hardex",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = run(*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", tmp_path / "dist", source)
    assert built.returncode == 0, built.stderr[-3000:]
    site = tmp_path / "site"
    installed = run(*pip, "install", "--no-deps", "--no-index", "--target", site, *(tmp_path / "dist").glob("*.whl"))
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert (site / "hardex" / "config.schema.yaml").is_file()

    # PYTHONPATH comes before the editable install's path: `import hardex` is the installed copy (asserted inside)
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    res = run(sys.executable, "-c", INSTALLED, site, tmp_path / "rehearsal", cwd=ROOT, env=env)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert (tmp_path / "rehearsal" / "config.yaml").is_file()

    # elsewhere there is no Snakefile: one line naming it and the option, and nothing written
    elsewhere = run(sys.executable, "-c", "import sys; from hardex.rehearsal import main; sys.exit(main(sys.argv[1:]))",
                    ROOT / "experiments" / "cpu_tiny.yaml", "--dir", tmp_path / "nowhere", "-n", cwd=tmp_path, env=env)
    assert elsewhere.returncode == 2
    assert elsewhere.stderr.strip() == (f"hardex-rehearse: no Snakefile in {tmp_path}: run this in the workflow's "
                                        f"folder (a hardex checkout) or name the file with --snakefile")
    assert not (tmp_path / "nowhere").exists()
