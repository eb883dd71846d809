"""The package's import arrows go one way (issue 35): no cycle among its modules, lazy imports
inside functions included, and the decoder imports nothing of the package outside it, nor Spark
or Delta (``python -m pipelines imports`` prints the arrows)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys

from pipelines import import_graph
from pipelines.import_graph import cycles, folded, graph, modules


def test_cycles_are_found_in_a_small_graph():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert folded({"pipelines.x.a": {"pipelines.y.b", "pipelines.x.c"}, "pipelines.y.b": set()}) == {"x": {"y"}, "y": set()}


def test_lazy_imports_count_and_type_checking_ones_do_not(tmp_path):
    pkg = tmp_path / "pipelines"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pipelines import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "sub" / "c.py").write_text("from ..a import thing\nfrom . import d\n")
    (pkg / "sub" / "d.py").write_text("")
    g = graph(pkg)
    assert g["pipelines.a"] == set() and g["pipelines.b"] == {"pipelines.a"}
    assert g["pipelines.sub.c"] == {"pipelines.a", "pipelines.sub.d"}


def test_the_package_has_no_import_cycle():
    g = graph()
    assert len(g) > 100 and sum(map(len, g.values())) > 300  # (the package was read)
    assert cycles(g) == [], "import cycles (python -m pipelines imports):\n" + "\n".join(map(str, cycles(g)))
    assert cycles(folded(g)) == []


def test_the_decoder_imports_nothing_of_the_pipeline_nor_spark_nor_delta():
    g = graph()
    decoder = [m for m in g if m == "pipelines.binlog" or m.startswith("pipelines.binlog.")]
    assert decoder
    outside = {m: sorted(t for t in g[m] if not t.startswith("pipelines.binlog")) for m in decoder}
    assert not any(outside.values()), outside
    mods = modules()
    for m in decoder:
        tree = ast.parse(mods[m].read_text(encoding="utf-8"))
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level]
        assert not [n for n in names if n.split(".")[0] in ("pyspark", "delta", "deltalake")], (m, names)


def test_the_command_prints_the_arrows_and_no_cycle():
    done = subprocess.run([sys.executable, "-m", "pipelines", "imports", "--packages"], capture_output=True,
                          text=True, timeout=120, cwd=import_graph.ROOT.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "binlog -> (nothing of the package)" in done.stdout
    assert done.stdout.rstrip().endswith("0 cycle(s)")


def test_no_module_imports_another_modules_private_names():
    """A name that starts with ``_`` is its module's own: what another module needs is public
    (a compiled module such as ``_speedups`` is a module, not a name)."""
    mods = modules()
    found = []
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = node.module or ""
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([source] if source else []))
            if not source.startswith("pipelines") or source == name:
                continue
            found += [(name, source, a.name) for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__") and f"{source}.{a.name}" not in mods
                      and a.name != "_speedups"]
    assert len(mods) > 100 and found == [], found


def _layout_rows() -> dict[str, set[str]]:
    """docs/architecture.md's Layout table: per package of a row, the packages its "may import"
    cell names (outside parentheses, which name modules; "nothing of ours": none)."""
    text = (import_graph.ROOT.parent / "docs" / "architecture.md").read_text()
    section = text[text.index("\n## Layout"):]
    rows = {}
    for line in section.splitlines()[2:]:  # (after the heading)
        if line.startswith("## "):
            break
        if not line.startswith("| `pipelines/"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        may = {n.split(".")[0] for n in re.findall(r"`([\w.]+)`", re.sub(r"\([^)]*\)", "", cells[-1]))}
        for path in re.findall(r"`pipelines/([\w.]+?)(?:\.py)?/?`", cells[0]):
            rows["pipelines" if path == "__init__" else path] = may
    return rows


def test_the_layout_table_names_each_packages_arrows():
    """The Layout section says which packages each may import: exactly the arrows the source has
    (every package may use ``logs`` and ``errors``, as the section says)."""
    rows = _layout_rows()
    arrows = folded(graph())
    missing = sorted(set(arrows) - set(rows))
    assert not missing, f"packages without a row in docs/architecture.md's Layout: {missing}"
    wrong = {pkg: {"the source": sorted(deps - {"logs", "errors"}), "the table": sorted(rows[pkg])}
             for pkg, deps in arrows.items() if deps - {"logs", "errors"} != rows[pkg]}
    assert not wrong, wrong
