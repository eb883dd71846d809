"""The ``>>>`` examples in ``pipelines/`` run: every module with an example that is not marked
``# doctest: +SKIP`` (those need a Spark session, a warehouse or a server) is checked here, from
the repository root (the examples read ``samples/binlogs``)."""
from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _modules() -> list[str]:
    out = []
    for p in sorted((REPO / "pipelines").rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        if p.name == "__main__.py" or not any(line.lstrip().startswith(">>>") and "doctest: +SKIP" not in line
                                              for line in text.splitlines()):
            continue
        parts = p.relative_to(REPO).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


MODULES = _modules()


def test_the_modules_with_examples_are_found():
    assert len(MODULES) > 40 and "pipelines.binlog.gtid" in MODULES and "pipelines.config" in MODULES


@pytest.mark.parametrize("module", MODULES)
def test_examples_run(module, monkeypatch):
    monkeypatch.chdir(REPO)
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS, report=True)
    assert result.attempted > 0 and result.failed == 0, f"{module}: {result.failed} of {result.attempted} examples failed"
