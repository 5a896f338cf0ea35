"""The library's shape: the stages are siblings, import chains stay short, and the project stands alone."""

from __future__ import annotations

import ast
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def import_graph() -> dict[str, set[str]]:
    """hardex module -> the hardex modules it imports (at the top or inside a function)."""
    modules = {}
    for path in (SRC / "hardex").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "hardex":
                for alias in node.names:  # `from hardex.report import tables` imports a module
                    sub = f"{node.module}.{alias.name}"
                    graph[name].add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in modules}
        graph[name].discard(name)
    return graph


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    best: list[str] = []

    def walk(path: list[str]) -> None:
        nonlocal best
        if len(path) > len(best):
            best = path
        for nxt in sorted(graph[path[-1]]):
            if nxt not in path:
                walk(path + [nxt])

    for module in graph:
        walk([module])
    return best


def test_the_stages_import_none_of_each_other():
    graph = import_graph()
    stages = {"hardex.probing", "hardex.adaptive", "hardex.training", "hardex.evaluation"}
    for stage in stages - {"hardex.adaptive"}:  # adaptive probing builds on chunked probing
        assert not graph[stage] & stages, f"{stage} imports {graph[stage] & stages}"


#: modules at the top that may be a fifth link: the report's figures draw what the tables compute (clearer than
#: passing the tables in), and the command-line tools (pyproject's scripts) validate a config, which reads the
#: settings views, which read the library: validation sits one level above the views it checks
TOPS = {"hardex.report.figures"} | {entry.split(":")[0] for entry in
                                    tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"].values()}


def test_no_import_chain_is_longer_than_four_modules():
    """At most four modules below the tops (TOPS), and five from them."""
    graph = import_graph()
    assert len(longest_chain(graph)) <= 5, " -> ".join(longest_chain(graph))
    below_tops = {m: deps - TOPS for m, deps in graph.items() if m not in TOPS}
    chain = longest_chain(below_tops)
    assert len(chain) <= 4, " -> ".join(chain)


def test_the_chain_measure_sees_function_level_imports():
    graph = import_graph()
    assert "hardex.generation.hf" in graph["hardex.generation"]  # imported inside load_generator
    assert longest_chain({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c"]


def test_the_project_does_not_point_outside_itself():
    # what a clone holds (tracked files): a user who clones hardex has no ../shared beside it
    found = subprocess.run(["git", "grep", "-n", "-F", "../shared", "--", "README.md", "docs", "src"], cwd=ROOT,
                           capture_output=True, text=True).stdout
    assert found == "", found
