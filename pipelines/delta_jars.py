"""The delta-spark jars this project runs with: which ones, where they live, and fetching them.

The version is not written down here: it is the version of the installed ``delta-spark`` Python
package (pinned in ``requirements.txt``), and the Scala suffix is that of the Scala library
PySpark ships. This is how ``delta.configure_spark_with_delta_pip`` picks its Maven coordinates,
so the jars can never drift from the Python API that drives them.

``make setup`` runs ``python -m pipelines.delta_jars fetch``: the Maven client (``mvn``, as the
machine configures it: no registry host is named here) copies ``io.delta:delta-spark_<scala>``
and ``io.delta:delta-storage`` into :data:`JARS_DIR` (git-ignored), once; a later fetch finds them
there and does nothing. :func:`pipelines.spark_session.session_conf` puts them on the classpath
of local sessions that ask for delta-spark when neither ``DELTA_JARS`` nor ``delta.packages``
names other jars.

    python -m pipelines.delta_jars fetch     # download when missing, print the jar paths
    python -m pipelines.delta_jars show      # coordinates and the jars found (exit 1 when missing)
"""
from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

JARS_DIR = Path(__file__).resolve().parents[1] / "jars"
DELTA_GROUP = "io.delta"


class DeltaJarsError(RuntimeError):
    """The delta-spark jars could not be found or fetched."""


@dataclass(frozen=True)
class Artifact:
    """One Maven artifact: ``group:artifact:version`` and the jar file name it gives."""

    group: str
    artifact: str
    version: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def jar_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"


def delta_version() -> str:
    """The version of the installed ``delta-spark`` Python package (the jars must match it)."""
    try:
        return importlib.metadata.version("delta-spark")
    except importlib.metadata.PackageNotFoundError:
        raise DeltaJarsError("the delta-spark Python package is not installed (make setup installs it)") from None


def scala_binary_version(pyspark_jars: Path | None = None) -> str:
    """The Scala binary version of the installed PySpark (``2.13``), read off its scala-library jar.

    >>> scala_binary_version()  # doctest: +SKIP
    '2.13'
    """
    if pyspark_jars is None:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            raise DeltaJarsError("pyspark is not installed (make setup installs it)")
        pyspark_jars = Path(spec.origin).parent / "jars"
    found = sorted({m.group(1) for p in pyspark_jars.glob("scala-library-*.jar")
                    if (m := re.match(r"scala-library-(\d+\.\d+)\.\d+\.jar$", p.name))})
    if len(found) != 1:
        raise DeltaJarsError(f"cannot tell PySpark's Scala version from {pyspark_jars}: scala-library jars {found}")
    return found[0]


def artifacts(version: str | None = None, scala: str | None = None) -> tuple[Artifact, Artifact]:
    """delta-spark and delta-storage at ``version`` (default: the installed Python package's).

    >>> [a.coordinates for a in artifacts("4.0.0", "2.13")]
    ['io.delta:delta-spark_2.13:4.0.0', 'io.delta:delta-storage:4.0.0']
    """
    version = version or delta_version()
    scala = scala or scala_binary_version()
    return (Artifact(DELTA_GROUP, f"delta-spark_{scala}", version), Artifact(DELTA_GROUP, "delta-storage", version))


def packages() -> str:
    """The coordinates as ``spark.jars.packages`` / ``spark-submit --packages`` take them.

    >>> packages()  # doctest: +SKIP
    'io.delta:delta-spark_2.13:4.0.0,io.delta:delta-storage:4.0.0'
    """
    return ",".join(a.coordinates for a in artifacts())


def find_jars(folder: Path = JARS_DIR) -> list[str] | None:
    """The paths of the fetched jars for the installed versions, or None when any is missing.

    Cheap (no subprocess, no JVM): asked every time a session is configured.
    """
    try:
        wanted = artifacts()
    except DeltaJarsError:
        return None
    paths = [folder / a.jar_name for a in wanted]
    return [str(p) for p in paths] if all(p.is_file() for p in paths) else None


def fetch(folder: Path = JARS_DIR, mvn: str = "mvn", *, version: str | None = None) -> list[str]:
    """Copy the jars into ``folder`` with the Maven client unless they are there; their paths.

    ``version`` defaults to the installed delta-spark package's. Raises :class:`DeltaJarsError`
    with Maven's own words when the registry refuses them.
    """
    wanted = artifacts(version)
    paths = [folder / a.jar_name for a in wanted]
    if all(p.is_file() for p in paths):
        return [str(p) for p in paths]
    if shutil.which(mvn) is None:
        raise DeltaJarsError(f"the Maven client {mvn!r} is not on PATH (make setup installs the Debian package maven)")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".fetch-") as staging:
        for a in wanted:
            cmd = [mvn, "-B", "-q", "dependency:copy", f"-Dartifact={a.coordinates}",
                   f"-DoutputDirectory={staging}"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0 or not (Path(staging) / a.jar_name).is_file():
                said = (done.stdout + done.stderr).strip().splitlines()
                raise DeltaJarsError(
                    f"Maven did not deliver {a.coordinates} (exit {done.returncode}): {' '.join(cmd)}\n"
                    + "\n".join(said[-30:]))
        for a in wanted:  # all fetched: move them in (a half-done fetch leaves nothing behind)
            (Path(staging) / a.jar_name).replace(folder / a.jar_name)
    return [str(p) for p in paths]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pipelines.delta_jars", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["fetch", "show"])
    p.add_argument("--dir", type=Path, default=JARS_DIR, help=f"jar folder (default {JARS_DIR})")
    args = p.parse_args(argv)
    try:
        if args.command == "fetch":
            before = find_jars(args.dir)
            jars = fetch(args.dir)
            print(("delta jars present: " if before else "delta jars fetched: ") + ", ".join(jars))
            return 0
        print(f"coordinates: {packages()}")
        jars = find_jars(args.dir)
        print(f"jars: {', '.join(jars) if jars else f'missing from {args.dir} (run make setup)'}")
        return 0 if jars else 1
    except DeltaJarsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
