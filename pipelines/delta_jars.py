"""The jars this project fetches with the Maven client: delta-spark's, and the ones ``s3a://``
paths need (hadoop-aws and its AWS SDK bundle); which ones, where they live, and fetching them.

No version is written down here:

* delta-spark and delta-storage: the version of the installed ``delta-spark`` Python package
  (pinned in ``requirements.txt``), with the Scala suffix of the Scala library PySpark ships. This
  is how ``delta.configure_spark_with_delta_pip`` picks its Maven coordinates, so the jars can
  never drift from the Python API that drives them.
* ``org.apache.hadoop:hadoop-aws``: the Hadoop version PySpark ships (its ``hadoop-client-api``
  jar); S3A must be of exactly the Hadoop it plugs into.
* ``software.amazon.awssdk:bundle``: the version hadoop-aws's POM declares, as Maven resolves it
  (the POM inherits it from its parent); found when the jars are fetched and written down in a
  listing beside them (:func:`s3a_artifacts`), so that a session looks for them without Maven.

``make setup`` runs ``python -m pipelines.delta_jars fetch``: the Maven client (``mvn``, as the
machine configures it: no registry host is named here) copies them into :data:`JARS_DIR`
(git-ignored), once; a later fetch finds them there and does nothing. The bundle is about 560 MB.
:func:`pipelines.spark_settings.session_conf` puts the Delta jars on the classpath of local
sessions that ask for delta-spark when neither ``DELTA_JARS`` nor ``delta.packages`` names other
jars; :func:`pipelines.spark_session.build_session` puts the S3A jars on the classpath of local
sessions that ask for ``s3a://`` (unless ``S3A_JARS`` names others).

    python -m pipelines.delta_jars fetch     # download when missing, print the jar paths
    python -m pipelines.delta_jars show      # coordinates and the jars found (exit 1 when missing)
    python -m pipelines.delta_jars list      # the fetched jars' coordinates, one a line (dist/jars.txt)
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from pipelines.errors import PipelineError
from pipelines.logs import get_logger

_log = get_logger(__name__)

JARS_DIR = Path(__file__).resolve().parents[1] / "jars"
DELTA_GROUP = "io.delta"
HADOOP_GROUP, HADOOP_AWS = "org.apache.hadoop", "hadoop-aws"
AWS_SDK_GROUP, AWS_SDK_BUNDLE = "software.amazon.awssdk", "bundle"
# what the fetch resolved for one Hadoop version, one coordinate a line (written last: a listing
# means every jar it names was fetched)
S3A_LISTING = "s3a-jars-hadoop-{hadoop}.txt"
_POM = "{http://maven.apache.org/POM/4.0.0}"


class DeltaJarsError(PipelineError, RuntimeError):
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

    @classmethod
    def parse(cls, coordinates: str) -> "Artifact":
        """``Artifact.parse("org.apache.hadoop:hadoop-aws:3.4.1")``: the inverse of :attr:`coordinates`."""
        parts = coordinates.strip().split(":")
        if len(parts) != 3 or not all(parts):
            raise DeltaJarsError(f"not group:artifact:version: {coordinates!r}")
        return cls(*parts)


def delta_version() -> str:
    """The version of the installed ``delta-spark`` Python package (the jars must match it)."""
    try:
        return importlib.metadata.version("delta-spark")
    except importlib.metadata.PackageNotFoundError:
        raise DeltaJarsError("the delta-spark Python package is not installed (make setup installs it)") from None


def pyspark_jars_dir() -> Path:
    """The folder of the jars the installed PySpark ships (``.../site-packages/pyspark/jars``)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise DeltaJarsError("pyspark is not installed (make setup installs it)")
    return Path(spec.origin).parent / "jars"


def _pyspark_jar_version(pattern: str, what: str, pyspark_jars: Path | None) -> str:
    """The one version that ``pattern`` (a file name with one group) finds among PySpark's jars."""
    pyspark_jars = pyspark_jars or pyspark_jars_dir()
    found = sorted({m.group(1) for p in pyspark_jars.glob("*.jar") if (m := re.fullmatch(pattern, p.name))})
    if len(found) != 1:
        raise DeltaJarsError(f"cannot tell PySpark's {what} from {pyspark_jars}: found {found or 'none'}")
    return found[0]


def scala_binary_version(pyspark_jars: Path | None = None) -> str:
    """The Scala binary version of the installed PySpark (``2.13``), read off its scala-library jar.

    >>> scala_binary_version()  # doctest: +SKIP
    '2.13'
    """
    return _pyspark_jar_version(r"scala-library-(\d+\.\d+)\.\d+\.jar", "Scala version", pyspark_jars)


def hadoop_version(pyspark_jars: Path | None = None) -> str:
    """The Hadoop version the installed PySpark ships (``3.4.1``), read off its hadoop-client-api jar.

    >>> hadoop_version()  # doctest: +SKIP
    '3.4.1'
    """
    return _pyspark_jar_version(r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar", "Hadoop version", pyspark_jars)


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
    with _staging(folder, mvn) as staging:
        for a in wanted:
            _mvn_copy(mvn, a.coordinates, staging)
        for a in wanted:  # all fetched: move them in (a half-done fetch leaves nothing behind)
            (staging / a.jar_name).replace(folder / a.jar_name)
    return [str(p) for p in paths]


@contextlib.contextmanager
def _staging(folder: Path, mvn: str) -> Iterator[Path]:
    """A temporary folder inside ``folder`` for a fetch (gone afterwards, whatever happened)."""
    if shutil.which(mvn) is None:
        raise DeltaJarsError(f"the Maven client {mvn!r} is not on PATH (make setup installs the Debian package maven)")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".fetch-") as staging:
        yield Path(staging)


def _mvn(mvn: str, args: list[str], what: str, delivers: Path) -> None:
    """Run the Maven client; raise :class:`DeltaJarsError` with Maven's own words unless it
    exits 0 and ``delivers`` is there."""
    cmd = [mvn, "-B", "-q", *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0 or not delivers.is_file():
        said = (done.stdout + done.stderr).strip().splitlines()
        raise DeltaJarsError(f"Maven did not deliver {what} (exit {done.returncode}): {' '.join(cmd)}\n"
                             + "\n".join(said[-30:]))


def _mvn_copy(mvn: str, coordinates: str, staging: Path, packaging: str = "jar") -> Path:
    """Copy one artifact (its jar, or its ``pom``) from the registry into ``staging``; its path."""
    a = Artifact.parse(coordinates)
    into = staging / f"{a.artifact}-{a.version}.{packaging}"
    _mvn(mvn, ["dependency:copy", f"-Dartifact={coordinates}:{packaging}", f"-DoutputDirectory={staging}"],
         coordinates if packaging == "jar" else f"{coordinates}:{packaging}", into)
    return into


# -- s3a:// : hadoop-aws and the AWS SDK bundle it declares -------------------------------------

def hadoop_aws(version: str | None = None) -> Artifact:
    """``org.apache.hadoop:hadoop-aws`` at ``version`` (default: PySpark's Hadoop version).

    >>> hadoop_aws("3.4.1").coordinates
    'org.apache.hadoop:hadoop-aws:3.4.1'
    """
    return Artifact(HADOOP_GROUP, HADOOP_AWS, version or hadoop_version())


def aws_sdk_version(hadoop_aws_pom: Path, mvn: str = "mvn") -> str:
    """The version of ``software.amazon.awssdk:bundle`` that hadoop-aws's POM declares.

    The POM names the dependency without a version: its parent (``hadoop-project``) manages it.
    Maven's effective POM (``help:effective-pom``: the POM with its parents' settings applied)
    says which; the Maven client fetches the parents it needs.
    """
    with tempfile.TemporaryDirectory(prefix="effective-pom-") as tmp:
        effective = Path(tmp) / "effective-pom.xml"
        _mvn(mvn, ["help:effective-pom", "-f", str(hadoop_aws_pom), f"-Doutput={effective}"],
             f"the effective POM of {hadoop_aws_pom.name}", effective)
        project = ET.parse(effective).getroot()
    declared = [d.findtext(f"{_POM}version") for d in project.iterfind(f"{_POM}dependencies/{_POM}dependency")
                if (d.findtext(f"{_POM}groupId"), d.findtext(f"{_POM}artifactId")) == (AWS_SDK_GROUP, AWS_SDK_BUNDLE)]
    if len(declared) != 1 or not declared[0]:
        raise DeltaJarsError(f"{hadoop_aws_pom.name} declares {AWS_SDK_GROUP}:{AWS_SDK_BUNDLE} "
                             f"{len(declared)} times (versions {declared}): cannot tell which SDK it needs")
    return declared[0]


def s3a_artifacts(folder: Path = JARS_DIR, hadoop: str | None = None) -> tuple[Artifact, Artifact] | None:
    """hadoop-aws and the AWS SDK bundle for PySpark's Hadoop version (or ``hadoop``), as the fetch
    into ``folder`` resolved them (its listing); None before that fetch. Cheap: no Maven, no JVM.
    """
    hadoop = hadoop or hadoop_version()
    listing = folder / S3A_LISTING.format(hadoop=hadoop)
    try:
        lines = listing.read_text().split()
    except FileNotFoundError:
        return None
    found = tuple(Artifact.parse(line) for line in lines)
    wanted = ((HADOOP_GROUP, HADOOP_AWS, hadoop), (AWS_SDK_GROUP, AWS_SDK_BUNDLE))
    if len(found) != 2 or [(a.group, a.artifact, a.version)[:len(w)] for a, w in zip(found, wanted)] != list(wanted):
        raise DeltaJarsError(f"{listing} should name {HADOOP_GROUP}:{HADOOP_AWS}:{hadoop} and "
                             f"{AWS_SDK_GROUP}:{AWS_SDK_BUNDLE}:<version>, one a line; it says {lines}: "
                             f"remove it and fetch again (python -m pipelines.delta_jars fetch)")
    return found


def find_s3a_jars(folder: Path = JARS_DIR, hadoop: str | None = None) -> list[str] | None:
    """The paths of the fetched hadoop-aws and AWS SDK bundle jars, or None when any is missing.

    Cheap (no subprocess, no JVM): asked when a session that reads ``s3a://`` is built.
    """
    wanted = s3a_artifacts(folder, hadoop)
    if wanted is None:
        return None
    paths = [folder / a.jar_name for a in wanted]
    return [str(p) for p in paths] if all(p.is_file() for p in paths) else None


def fetch_s3a(folder: Path = JARS_DIR, mvn: str = "mvn", *, hadoop: str | None = None) -> list[str]:
    """Copy hadoop-aws (at PySpark's Hadoop version, or ``hadoop``) and the AWS SDK bundle its POM
    declares into ``folder`` with the Maven client unless they are there; their paths.

    Raises :class:`DeltaJarsError` with Maven's own words when the registry refuses them. The
    listing of what was resolved (:func:`s3a_artifacts`) goes in last, after both jars.
    """
    found = find_s3a_jars(folder, hadoop)
    if found:
        return found
    aws = hadoop_aws(hadoop)
    with _staging(folder, mvn) as staging:
        pom = _mvn_copy(mvn, aws.coordinates, staging, "pom")
        sdk = Artifact(AWS_SDK_GROUP, AWS_SDK_BUNDLE, aws_sdk_version(pom, mvn))
        for a in (aws, sdk):
            _mvn_copy(mvn, a.coordinates, staging)
        listing = staging / S3A_LISTING.format(hadoop=aws.version)
        listing.write_text(f"{aws.coordinates}\n{sdk.coordinates}\n")
        for name in (aws.jar_name, sdk.jar_name, listing.name):  # (a half-done fetch leaves no listing)
            (staging / name).replace(folder / name)
    return [str(folder / aws.jar_name), str(folder / sdk.jar_name)]


def s3a_packages() -> str:
    """hadoop-aws's coordinates as ``spark-submit --packages`` takes them (Spark's resolver brings
    the AWS SDK bundle hadoop-aws declares).

    >>> s3a_packages()  # doctest: +SKIP
    'org.apache.hadoop:hadoop-aws:3.4.1'
    """
    return hadoop_aws().coordinates


def fetched_artifacts(folder: Path = JARS_DIR) -> list[Artifact] | None:
    """Every artifact a cluster needs, as fetched into ``folder`` (delta-spark, delta-storage,
    hadoop-aws, the AWS SDK bundle); None when any jar is missing."""
    if find_jars(folder) is None or find_s3a_jars(folder) is None:
        return None
    return [*artifacts(), *s3a_artifacts(folder)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pipelines.delta_jars", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["fetch", "show", "list"],
                   help="fetch: download what is missing; show: coordinates and jars found; "
                        "list: the fetched jars' coordinates, one a line (make package: dist/jars.txt)")
    p.add_argument("--dir", type=Path, default=JARS_DIR, help=f"jar folder (default {JARS_DIR})")
    p.add_argument("--out", type=Path, help="list: write the listing to this file instead of printing it")
    args = p.parse_args(argv)
    try:
        if args.command == "fetch":
            for what, find, get in (("delta", find_jars, fetch), ("s3a", find_s3a_jars, fetch_s3a)):
                before = find(args.dir)
                jars = get(args.dir)
                if not before:  # (set-up re-checks are silent when there is nothing to do)
                    print(f"{what} jars fetched: {', '.join(jars)}")
            return 0
        if args.command == "list":
            found = fetched_artifacts(args.dir)
            if found is None:
                raise DeltaJarsError(f"jars missing from {args.dir}: run make setup (python -m pipelines.delta_jars fetch)")
            text = "".join(f"{a.coordinates}\n" for a in found)
            if args.out is None:
                print(text, end="")
            else:
                args.out.write_text(text)
                print(f"{args.out}: {len(found)} jars")
            return 0
        print(f"delta coordinates: {packages()}")
        jars = find_jars(args.dir)
        print(f"delta jars: {', '.join(jars) if jars else f'missing from {args.dir} (run make setup)'}")
        s3a = s3a_artifacts(args.dir)
        print(f"s3a coordinates: {','.join(a.coordinates for a in s3a) if s3a else s3a_packages() + ' (and the SDK bundle its POM declares)'}")
        s3a_jars = find_s3a_jars(args.dir)
        print(f"s3a jars: {', '.join(s3a_jars) if s3a_jars else f'missing from {args.dir} (run make setup)'}")
        return 0 if jars and s3a_jars else 1
    except DeltaJarsError as e:
        _log.error(str(e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
