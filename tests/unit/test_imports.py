"""What importing the library costs: planning (every `snakemake -n`) and the light jobs (the local rules) load no
model or plotting package, and a hardex import inside a function says why it is not at the top of its module."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

#: packages that take seconds to import: only the jobs that run a model import them (in the functions that use them)
MODEL_PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "vllm")
#: planning draws nothing either (the figure jobs import matplotlib)
PLANNING_EXCLUDED = MODEL_PACKAGES + ("matplotlib",)

MARKER = re.compile(r"#\s*(cycle|deferred):")
HARDEX_IMPORT = re.compile(r"^(?:from hardex[\w.]* import (?:\([^)]*\)|[^\n]*)|import hardex[\w.]*[^\n]*)", re.M)


def hardex_imports(text: str) -> list[str]:
    """The top-level hardex import statements of a Snakefile, rule file or script (one spread over lines whole)."""
    return HARDEX_IMPORT.findall(text)


def light_job_scripts() -> dict[str, Path]:
    """rule -> its script, for the local rules (`localrules:`): the cheap jobs, run on the submitting machine."""
    rules_text = "\n".join(p.read_text() for p in sorted((ROOT / "rules").glob("*.smk")))
    local = {name for block in re.findall(r"^localrules:\n((?:[ \t]+\w+,?\n)+)", rules_text, re.M)
             for name in re.findall(r"\w+", block)}
    scripts = {}
    for block in re.split(r"^(?=(?:rule|checkpoint) )", rules_text, flags=re.M):
        if (m := re.match(r"(?:rule|checkpoint) (\w+):", block)) and m[1] in local:
            scripts[m[1]] = (ROOT / "rules" / re.search(r'script:\s+"([^"]+)"', block)[1]).resolve()
    return scripts


def packages_loaded_by(groups: dict[str, list[str]], packages: tuple[str, ...]) -> dict[str, list[str]]:
    """group -> the packages among `packages` that its import statements loaded, the groups run in order in one
    fresh interpreter (a package a group loaded is counted against that group only)."""
    code = """
import json, sys
groups, packages, found = json.loads(sys.argv[1]), json.loads(sys.argv[2]), {}
for name, statements in groups.items():
    before = {p for p in packages if p in sys.modules}
    exec("\\n".join(statements), {})
    found[name] = sorted(p for p in packages if p in sys.modules and p not in before)
print(json.dumps(found))
"""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(groups), json.dumps(packages)], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_planning_and_the_light_jobs_import_no_model_package():
    planning = [s for p in [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]
                for s in hardex_imports(p.read_text())]
    assert any("memory_plan" in s for s in planning)  # the parse finds common.smk's imports
    light = light_job_scripts()
    assert {"dataset_split", "select", "report_tables"} <= set(light)
    groups = {"planning": planning, **{rule: hardex_imports(path.read_text()) for rule, path in light.items()}}
    found = packages_loaded_by(groups, PLANNING_EXCLUDED)
    assert found.pop("planning") == [], "planning (rules/*.smk) imports a model or plotting package"
    heavy = {rule: [p for p in loaded if p in MODEL_PACKAGES] for rule, loaded in found.items()}
    assert all(not loaded for loaded in heavy.values()), f"light jobs importing model packages: {heavy}"


def function_level_hardex_imports(path: Path) -> list[tuple[int, bool]]:
    """(line, whether a `# cycle:` or `# deferred:` comment in its function, at or above it, says why) of each
    hardex import inside a function of a module."""
    text = path.read_text()
    lines = text.splitlines()
    found = []
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(n.split(".")[0] == "hardex" for n in names):
                said = any(MARKER.search(line) for line in lines[fn.lineno - 1:node.end_lineno])
                found.append((node.lineno, said))
    return sorted(set(found))


def test_a_hardex_import_inside_a_function_says_why():
    """A module's header says what it depends on: a hardex import sits at the top unless it would close an import
    cycle (`# cycle:`) or load what a light importer never needs (`# deferred:`), said beside it."""
    unsaid = []
    for path in sorted((SRC / "hardex").rglob("*.py")):
        unsaid += [f"{path.relative_to(ROOT)}:{line}" for line, said in function_level_hardex_imports(path) if not said]
    assert unsaid == [], "move these to the top of their module, or say why not (# cycle: / # deferred:)"


def test_the_marker_check_reads_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import hardex\n\n\ndef f():\n    from hardex.io import x\n\n\n"
                      "def g():\n    # cycle: hardex.io imports this module\n    from hardex.io import y\n")
    assert function_level_hardex_imports(module) == [(5, False), (10, True)]
