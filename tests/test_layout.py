"""The package graph stays a layered DAG: no import cycle, and nothing below the workflows imports them or the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rightsize"
TOP = {"cli", "workflows", "api", "__main__"}  # entry points: may import anything
# The package itself is the API's facade (`import rightsize as rs; rs.plan(...)`, loaded on first use).
FACADE = {("rightsize", "rightsize.api")}


def _modules() -> dict[str, Path]:
    out = {}
    for f in SRC.rglob("*.py"):
        parts = f.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imports(name: str, path: Path) -> set[str]:
    """Every rightsize module ``name`` imports (module level, deferred and TYPE_CHECKING alike)."""
    pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}  # `from rightsize import api` imports a module too
    return {m for m in found if m.startswith("rightsize")}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "rightsize"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


MODULES = _modules()
# The facade's edge is lazy (module __getattr__) and sits outside the layers: left out of the graph.
EDGES = {m: {t for t in _imports(m, p) if t in MODULES and t != m and (m, t) not in FACADE} for m, p in MODULES.items()}


def test_no_module_import_cycles() -> None:
    assert _cycles(EDGES) == []


def test_no_package_import_cycles() -> None:
    pkgs: dict[str, set[str]] = {}
    for m, ts in EDGES.items():
        pkgs.setdefault(_package(m), set()).update(_package(t) for t in ts if _package(t) != _package(m))
    assert _cycles(pkgs) == []


def test_nothing_below_the_entry_points_imports_them() -> None:
    upward = sorted(
        f"{m} -> {t}" for m, ts in EDGES.items() if _package(m) not in TOP for t in ts if _package(t) in TOP
    )
    assert upward == []


def test_the_load_generator_does_not_import_the_server() -> None:
    assert not [t for m, ts in EDGES.items() if _package(m) == "loadgen" for t in ts if _package(t) == "serve"]
