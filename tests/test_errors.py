"""One error hierarchy: every error the project raises to its caller derives from
:class:`pipelines.errors.PipelineError` (the decoder's and the dump reader's from
:class:`pipelines.binlog.errors.BinlogError`, which keeps the decoder free of the rest), and each
class says its exit code and whether its message is the whole report."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import pipelines
from pipelines.binlog.errors import BinlogError, NotABinlog
from pipelines.config import ConfigError
from pipelines.errors import EXIT_FAILED, EXIT_LOCKED, EXIT_USAGE, PipelineError, exit_code, one_line
from pipelines.lock import WarehouseLocked
from pipelines.silver.columns import SilverStepError
from pipelines.snapshot.errors import CorruptDump

# control flow inside the silver step, never raised to a caller (Unreadable, NotCanonical: the
# segment takes Spark's path instead)
INTERNAL = {"Unsupported", "NotCanonical", "Fallback", "Unreadable"}


def _project_errors() -> list[type]:
    found = {}
    for info in pkgutil.walk_packages(pipelines.__path__, "pipelines."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name \
                    and not name.startswith("_") and name not in INTERNAL:
                found[f"{info.name}.{name}"] = obj
    return list(found.values())


def test_every_error_has_one_of_the_two_roots():
    errors = _project_errors()
    assert len(errors) > 20
    strays = [f"{e.__module__}.{e.__name__}" for e in errors if not issubclass(e, (PipelineError, BinlogError))]
    assert not strays
    # the decoder's root stays apart: it imports nothing of the rest
    assert not issubclass(BinlogError, PipelineError)


@pytest.mark.parametrize("error,code,line", [
    (ConfigError("conf/x.yaml", [("input", "must be set")]), EXIT_USAGE, "conf/x.yaml: 1 problem(s)"),
    (WarehouseLocked("/wh", None, 0), EXIT_LOCKED, "warehouse /wh is locked by another process"),
    (SilverStepError("shop.t: no key"), EXIT_FAILED, "SilverStepError: shop.t: no key"),
    (NotABinlog("not a binlog", file="b.000001", offset=0), EXIT_FAILED, "b.000001"),
    (CorruptDump("bad VALUES", file="d.sql", offset=17), EXIT_FAILED, "d.sql: offset 17: bad VALUES"),
    (ValueError("first\nsecond"), EXIT_FAILED, "ValueError: first"),
])
def test_exit_code_and_one_line(error, code, line):
    assert exit_code(error) == code
    text = one_line(error)
    assert "\n" not in text or isinstance(error, ConfigError)
    assert text.startswith(line), text
