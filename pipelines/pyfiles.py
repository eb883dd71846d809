"""The ``--py-files`` zip: the ``pipelines`` package's Python modules under ``pipelines/``, what a
Spark Python worker imports. Built here only: by ``make package`` (``dist/binlog_delta.zip``, with
the jobs' ``_bootstrap.py`` at its root, see docs/deploy.md) and by
:func:`pipelines.bronze.tasks.ship_package` (a temporary zip for ``addPyFile`` when the package is
not installed).

    python -m pipelines.pyfiles --out dist/binlog_delta.zip --bootstrap jobs/_bootstrap.py
"""
from __future__ import annotations

import argparse
import zipfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def package_files(pkg: Path = PACKAGE_DIR) -> list[Path]:
    """The package's ``.py`` files, sorted (no caches, no C sources, no compiled extensions)."""
    return [p for p in sorted(pkg.rglob("*.py")) if "__pycache__" not in p.parts]


def build_zip(out: Path, *, bootstrap: Path | None = None, pkg: Path = PACKAGE_DIR) -> int:
    """Write the zip to ``out`` (replacing it); ``bootstrap`` goes to its root as
    ``_bootstrap.py``. Returns the number of files written."""
    files = package_files(pkg)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            z.write(f, f.relative_to(pkg.parent).as_posix())
        if bootstrap is not None:
            z.write(bootstrap, "_bootstrap.py")
    return len(files) + (bootstrap is not None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="the zip to write")
    p.add_argument("--bootstrap", type=Path, help="a file to add at the zip's root as _bootstrap.py")
    args = p.parse_args(argv)
    n = build_zip(args.out, bootstrap=args.bootstrap)
    print(f"{args.out}: {n} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
