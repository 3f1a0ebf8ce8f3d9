"""No module imports itself back: the import graph of the packages has no cycle.

A node is a module (a package is its `__init__`). `import a.b` and `from a.b import c`
are an edge to `a.b`, or to `a.b.c` when `c` is a module of its own; the packages a
module passes through on the way (`a`) are not edges, so a package's `__init__` may name
its modules' contents. Every import counts: at module level, inside functions, and under
`TYPE_CHECKING` (a type-only import back is still a cycle a reader has to untangle).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemas", "reading", "synth", "streams", "gpu_node", "gateway")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _package_of(name: str, path: Path) -> str:
    """The package a module's relative imports start from."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of `modules` that `name` imports."""
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(name, path).split(".")
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in modules else base)
    # The nearest module that exists (`import a.b.c` of a name inside a.b counts as a.b).
    known: set[str] = set()
    for target in targets:
        module = target
        while module and module not in modules:
            module = module.rpartition(".")[0]
        if module and module != name:
            known.add(module)
    return known


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _a_cycle(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One path round a component, first module first and last: the cycle to read."""
    members = set(component)
    path, seen = [component[0]], {component[0]}
    while True:
        following = sorted(graph[path[-1]] & members)
        if component[0] in following and len(path) > 1:
            return [*path, component[0]]
        fresh = [m for m in following if m not in seen]
        if not fresh:  # back to a module already on the path: the cycle from there
            again = min(following, key=path.index)
            return [*path[path.index(again) :], again]
        path.append(fresh[0])
        seen.add(fresh[0])


def test_the_cycle_finder_finds_a_cycle_and_passes_a_chain() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _a_cycle(["a", "b", "c"], graph) == ["a", "b", "c", "a"]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    cycles = [" -> ".join(_a_cycle(c, graph)) for c in _cycles(graph)]
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)
