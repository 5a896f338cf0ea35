"""The library's shape: layers that import only downwards (docs/architecture.md), no circle, stages that are siblings,
and the project standing alone."""

from __future__ import annotations

import ast
import subprocess
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


def declared_layers() -> dict[str, int]:
    """hardex module -> its layer's rank (0 at the bottom), from the layer table that opens docs/architecture.md:
    the page a reader sees is the contract the test holds. A name ending in `.*` takes every module under it
    that the table does not name itself."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("<!-- layers -->")[1]
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| **")]
    ranks, patterns = {}, {}
    for rank, (layer, modules) in enumerate(reversed(rows)):  # the table lists the top layer first
        for name in (m.strip().strip("`") for m in modules.split(",")):
            full = "hardex" if name == "hardex" else f"hardex.{name}"
            (patterns if full.endswith(".*") else ranks)[full.removesuffix(".*")] = rank
    for module in import_graph():
        if module not in ranks:
            package = next((p for p in sorted(patterns, key=len, reverse=True) if module.startswith(p + ".")), None)
            if package is not None:
                ranks[module] = patterns[package]
    return ranks


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `graph` (its strongly connected components of more than one module; Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_stages_import_none_of_each_other():
    graph = import_graph()
    stages = {"hardex.probing", "hardex.adaptive", "hardex.training", "hardex.evaluation"}
    for stage in stages - {"hardex.adaptive"}:  # adaptive probing builds on chunked probing
        assert not graph[stage] & stages, f"{stage} imports {graph[stage] & stages}"


def test_every_module_has_a_layer_and_imports_only_its_own_or_lower_ones():
    """docs/architecture.md's layers, bottom to top: ground, domain, stages, workflow, commands. A module imports
    modules of its own layer or below, never above; a new module is placed in the table before it is imported."""
    graph, ranks = import_graph(), declared_layers()
    unplaced = sorted(set(graph) - set(ranks))
    assert not unplaced, f"modules in no layer of docs/architecture.md: {unplaced}"
    upward = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if ranks[d] > ranks[m])
    assert not upward, f"imports from a lower layer to a higher one: {upward}"


def test_no_modules_import_each_other_in_a_circle():
    graph = import_graph()
    assert not cycles(graph), cycles(graph)


def test_the_layer_and_circle_checks_see_what_they_are_for():
    graph = import_graph()
    assert "hardex.generation.hf" in graph["hardex.generation"]  # imported inside load_generator: seen too
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    ranks = declared_layers()
    assert ranks["hardex.io"] < ranks["hardex.selection"] < ranks["hardex.training"] < ranks["hardex.config"] \
        < ranks["hardex.archive"]
    assert ranks["hardex.tasks.gsm8k"] == ranks["hardex.tasks"]  # a package's `.*` places its modules


def test_the_project_does_not_point_outside_itself():
    # what a clone holds (tracked files): a user who clones hardex has no ../shared beside it
    found = subprocess.run(["git", "grep", "-n", "-F", "../shared", "--", "README.md", "docs", "src"], cwd=ROOT,
                           capture_output=True, text=True).stdout
    assert found == "", found
