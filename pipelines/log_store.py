"""The Delta LogStore that lets several drivers commit to one table on S3: what it is called, the
Spark settings that select it, and building its jar.

delta-spark's default LogStore for ``s3a://`` (``io.delta.storage.S3SingleDriverLogStore``) is safe
only when every writer runs in one JVM: it checks that ``_delta_log/N.json`` does not exist, then
writes it, so two drivers (an Airflow retry racing a manual run) can both write version N and the
second silently replaces the first commit. :data:`LOG_STORE_CLASS`
(``pipelines/jvm/ConditionalPutS3LogStore.java``) writes a commit with one conditional PUT
(``If-None-Match: *``) through S3A's own S3 client; S3 refuses it when the key exists (412), and
Delta's commit loop then checks the winning commit and tries the next version, as it does for a
conflict in one JVM. It needs a store that honours conditional writes (AWS S3 since August 2024,
MinIO, moto), as the warehouse lease does (docs/operations.md, "Concurrent runs").

The jar is built here, not fetched: ``python -m pipelines.log_store build`` (``make setup``)
compiles the one source file with ``javac --release 17`` against the jars ``make setup`` fetched
(delta-storage, hadoop-aws, the AWS SDK bundle) and PySpark's ``hadoop-client-api`` and
``slf4j-api``, into ``jars/binlog-delta-logstore-<digest>.jar``. The digest covers the source and
the names (so the versions) of those jars: a changed source or an upgraded Delta or Hadoop looks
for another jar, which the next build makes (and the stale one goes). ``make package`` copies it to
``dist/binlog-delta-logstore.jar`` (:data:`DIST_JAR_NAME`; its manifest names the digest).

:func:`pipelines.spark_settings.session_conf` puts the jar in ``spark.jars`` (next to delta-spark's:
the class extends delta-storage's, so it must be loaded by the same class loader) and sets
:func:`spark_conf` for sessions asked for ``s3a://``. Under ``spark-submit`` the submit command
decides: docs/deploy.md ("Several writers on S3") gives the ``--jars`` and ``--conf`` to add.

    python -m pipelines.log_store build                # build unless built, print the jar's path
    python -m pipelines.log_store show                 # the class, the settings, the jar (exit 1 when missing)
    python -m pipelines.log_store package --out dist   # copy the jar to dist/binlog-delta-logstore.jar
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from pipelines.errors import PipelineError
from pipelines import delta_jars
from pipelines.logs import get_logger

_log = get_logger(__name__)

LOG_STORE_CLASS = "io.binlogdelta.storage.ConditionalPutS3LogStore"
# the URI schemes delta-spark picks the LogStore for (spark.delta.logStore.<scheme>.impl): s3a://,
# and s3:// where a cluster maps it to S3A (fs.s3.impl)
SCHEMES = ("s3a", "s3")
SOURCE = Path(__file__).resolve().parent / "jvm" / "ConditionalPutS3LogStore.java"
JAR_PREFIX = "binlog-delta-logstore"
DIST_JAR_NAME = f"{JAR_PREFIX}.jar"
JAVA_RELEASE = "17"
# a jar's entries all carry this time, so one source and classpath give the same bytes
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class LogStoreBuildError(PipelineError, RuntimeError):
    """The LogStore jar could not be built."""


def conf_key(scheme: str) -> str:
    """The Spark setting that picks delta-spark's LogStore for ``scheme``.

    >>> conf_key("s3a")
    'spark.delta.logStore.s3a.impl'
    """
    return f"spark.delta.logStore.{scheme}.impl"


def spark_conf(cls: str = LOG_STORE_CLASS) -> dict[str, str]:
    """The Spark settings that make delta-spark commit through ``cls`` on every scheme of :data:`SCHEMES`.

    >>> spark_conf()
    {'spark.delta.logStore.s3a.impl': 'io.binlogdelta.storage.ConditionalPutS3LogStore', 'spark.delta.logStore.s3.impl': 'io.binlogdelta.storage.ConditionalPutS3LogStore'}
    """
    return {conf_key(scheme): cls for scheme in SCHEMES}


def compile_classpath(folder: Path = delta_jars.JARS_DIR) -> list[Path] | None:
    """The jars the source compiles against: delta-storage, hadoop-aws and the AWS SDK bundle as
    fetched into ``folder``, PySpark's ``hadoop-client-api`` and ``slf4j-api``; None when a fetched
    one is missing. Cheap: no Maven, no JVM."""
    delta = delta_jars.find_jars(folder)
    s3a = delta_jars.find_s3a_jars(folder)
    if delta is None or s3a is None:
        return None
    storage = [Path(j) for j in delta if Path(j).name.startswith("delta-storage-")]
    pyspark = delta_jars.pyspark_jars_dir()
    hadoop = pyspark / f"hadoop-client-api-{delta_jars.hadoop_version(pyspark)}.jar"
    slf4j = sorted(pyspark.glob("slf4j-api-*.jar"))
    if len(storage) != 1 or not hadoop.is_file() or len(slf4j) != 1:
        raise LogStoreBuildError(f"cannot tell the jars to compile against: delta-storage {storage}, "
                                 f"{hadoop} ({'found' if hadoop.is_file() else 'missing'}), slf4j-api {slf4j}")
    return [*storage, *(Path(j) for j in s3a), hadoop, slf4j[0]]


def digest(source: Path = SOURCE, classpath: list[Path] | None = None) -> str:
    """12 hex digits of SHA-256 over the source and the names of the jars it compiles against.

    >>> len(digest(classpath=[Path("delta-storage-4.0.0.jar")]))
    12
    """
    h = hashlib.sha256(source.read_bytes())
    for jar in classpath or []:
        h.update(b"\0" + jar.name.encode())
    return h.hexdigest()[:12]


def jar_name(source: Path = SOURCE, classpath: list[Path] | None = None) -> str:
    """``binlog-delta-logstore-<digest>.jar`` (:func:`digest`)."""
    return f"{JAR_PREFIX}-{digest(source, classpath)}.jar"


def find_jar(folder: Path = delta_jars.JARS_DIR, source: Path = SOURCE) -> str | None:
    """The built jar of this source and these jars, or None when it is not built (or cannot be:
    the jars it compiles against are missing). Cheap: asked when a session for ``s3a://`` is configured."""
    try:
        classpath = compile_classpath(folder)
    except (delta_jars.DeltaJarsError, LogStoreBuildError):
        return None
    if classpath is None:
        return None
    jar = folder / jar_name(source, classpath)
    return str(jar) if jar.is_file() else None


def build(folder: Path = delta_jars.JARS_DIR, source: Path = SOURCE, javac: str = "javac") -> str:
    """Compile ``source`` into ``folder``/:func:`jar_name` unless that jar is there; its path.

    Older builds (``binlog-delta-logstore-*.jar`` of another digest) are removed. Raises
    :class:`LogStoreBuildError` with javac's own words when the source does not compile, and when
    the jars it compiles against have not been fetched.
    """
    classpath = compile_classpath(folder)
    if classpath is None:
        raise LogStoreBuildError(f"the delta-storage, hadoop-aws or AWS SDK jars are missing from {folder}: "
                                 f"fetch them first (python -m pipelines.delta_jars fetch)")
    jar = folder / jar_name(source, classpath)
    if not jar.is_file():
        if shutil.which(javac) is None:
            raise LogStoreBuildError(f"the Java compiler {javac!r} is not on PATH (make setup installs "
                                     f"openjdk-17-jdk-headless)")
        with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
            classes = Path(tmp) / "classes"
            cmd = [javac, "--release", JAVA_RELEASE, "-encoding", "UTF-8",
                   "-cp", ":".join(map(str, classpath)), "-d", str(classes), str(source)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise LogStoreBuildError(f"javac did not compile {source.name} (exit {done.returncode}): "
                                         f"{' '.join(cmd)}\n{(done.stdout + done.stderr).strip()}")
            staged = Path(tmp) / jar.name
            _write_jar(staged, classes, digest(source, classpath))
            staged.replace(jar)  # (a half-built jar never carries the name)
    for stale in folder.glob(f"{JAR_PREFIX}-*.jar"):
        if stale != jar:
            stale.unlink(missing_ok=True)
    return str(jar)


def _write_jar(path: Path, classes: Path, version: str) -> None:
    """A jar of the class files under ``classes``, with a manifest that names ``version``."""
    manifest = (f"Manifest-Version: 1.0\r\nImplementation-Title: {JAR_PREFIX}\r\n"
                f"Implementation-Version: {version}\r\nCreated-By: pipelines.log_store\r\n\r\n")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", _ZIP_TIME), manifest)
        for f in sorted(p for p in classes.rglob("*.class")):
            info = zipfile.ZipInfo(f.relative_to(classes).as_posix(), _ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, f.read_bytes())


def package(out: Path, folder: Path = delta_jars.JARS_DIR) -> Path:
    """Copy the built jar to ``out``/:data:`DIST_JAR_NAME` (``make package``); the copy's path."""
    jar = find_jar(folder)
    if jar is None:
        raise LogStoreBuildError(f"the LogStore jar is not built in {folder}: run make setup "
                                 f"(python -m pipelines.log_store build)")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(jar, out / DIST_JAR_NAME)
    return out / DIST_JAR_NAME


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pipelines.log_store", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["build", "show", "package"],
                   help="build: compile the jar unless built; show: the class, its settings and the jar; "
                        f"package: copy the jar to OUT/{DIST_JAR_NAME}")
    p.add_argument("--dir", type=Path, default=delta_jars.JARS_DIR, help=f"jar folder (default {delta_jars.JARS_DIR})")
    p.add_argument("--out", type=Path, default=Path("dist"), help="package: the folder to copy the jar to (default dist)")
    args = p.parse_args(argv)
    try:
        if args.command == "build":
            before = find_jar(args.dir)
            jar = build(args.dir)
            if not before:  # (set-up re-checks are silent when there is nothing to do)
                print(f"log store jar built: {jar}")
            return 0
        if args.command == "package":
            print(f"{package(args.out, args.dir)}: {LOG_STORE_CLASS}")
            return 0
        print(f"class: {LOG_STORE_CLASS}")
        print(" ".join(f"--conf {k}={v}" for k, v in spark_conf().items()))
        jar = find_jar(args.dir)
        print(f"jar: {jar or f'not built in {args.dir} (run make setup)'}")
        return 0 if jar else 1
    except (LogStoreBuildError, delta_jars.DeltaJarsError) as e:
        _log.error(str(e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
