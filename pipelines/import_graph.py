"""Which module of the package imports which, read from the source (no module is imported), lazy
imports inside functions included and ``if TYPE_CHECKING:`` blocks left out; and the cycles.

``python -m pipelines imports`` prints each module's arrows and then the cycles (none is the rule:
``tests/test_import_graph.py`` holds the package to it); ``--packages`` folds modules into their
top-level package (``pipelines.bronze.step`` -> ``bronze``).
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = ("pipelines",) + path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imported(tree: ast.AST, package: str) -> list[str]:
    """The dotted names ``tree`` imports (for ``from x import y``: ``x.y``, which may be a name in
    ``x``), outside ``if TYPE_CHECKING:`` blocks."""
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            if isinstance(child, ast.Import):
                names.extend(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join(up + ([child.module] if child.module else []))
                names.extend(f"{base}.{a.name}" for a in child.names)
            visit(child)

    visit(tree)
    return names


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (itself left out)."""
    mods = modules(root)
    out: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for dotted in _imported(ast.parse(path.read_text(encoding="utf-8")), package):
            while dotted and dotted not in mods:  # "x.y" where y is a name: the module x
                dotted = dotted.rpartition(".")[0]
            if dotted and dotted != name:
                targets.add(dotted)
        out[name] = targets
    return out


def folded(g: dict[str, set[str]]) -> dict[str, set[str]]:
    """``g`` with each module replaced by its top-level package (``pipelines.x.y`` -> ``x``)."""
    def top(m: str) -> str:
        return m.split(".")[1] if m.count(".") else m

    out: dict[str, set[str]] = {}
    for m, targets in g.items():
        out.setdefault(top(m), set()).update(top(t) for t in targets if top(t) != top(m))
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(g.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pipelines imports", description=__doc__.splitlines()[0])
    p.add_argument("--packages", action="store_true", help="fold modules into their top-level package")
    args = p.parse_args(argv)
    g = graph()
    if args.packages:
        g = folded(g)
    for name in sorted(g):
        print(f"{name} -> {', '.join(sorted(g[name])) or '(nothing of the package)'}")
    found = cycles(g)
    for c in found:
        print("cycle: " + " <-> ".join(c))
    print(f"{len(g)} modules, {sum(map(len, g.values()))} arrows, {len(found)} cycle(s)")
    return 1 if found else 0
