"""Which backend a call uses (:func:`resolve_backend`), the errors, SQL identifier quoting, and the
handles both backends share (a delta-rs table, the Arrow filesystem of a URI)."""
from __future__ import annotations

from typing import Literal

from pyspark.sql import SparkSession


Backend = Literal["auto", "spark", "rs"]


BACKENDS = ("auto", "spark", "rs")


DELTA_LOG = "_delta_log"


# Spark SQL settings delta-spark reads for idempotent DML and for the commit's user metadata.
_SPARK_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"


_SPARK_TXN_VERSION = "spark.databricks.delta.write.txnVersion"


_SPARK_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


class DeltaIOError(RuntimeError):
    """A Delta table operation could not be carried out as asked."""


def quote_ident(name: str) -> str:
    """Quote one column name for Spark SQL and delta-rs predicates: backticks, inner ones doubled.

    >>> quote_ident("select")
    '`select`'
    >>> quote_ident("we`ird.name")
    '`we``ird.name`'
    """
    if not isinstance(name, str) or name == "":
        raise ValueError(f"a column name must be a non-empty string, got {name!r}")
    return "`" + name.replace("`", "``") + "`"


def qualified(alias: str, name: str) -> str:
    """``alias.`name``` for MERGE predicates.

    >>> qualified("t", "a b")
    't.`a b`'
    """
    return f"{alias}.{quote_ident(name)}"


def resolve_backend(spark: SparkSession | None, backend: str = "auto") -> str:
    """Turn ``"auto"`` into ``"spark"`` or ``"rs"``; check that ``"spark"`` can run.

    ``"auto"`` is delta-spark on a cluster (a master that is not local) whose classpath has it,
    and delta-rs everywhere else: on one machine delta-rs commits without Spark jobs and is the
    faster of the two. Ask for ``"spark"`` to use delta-spark locally.

    >>> resolve_backend(None, "rs")
    'rs'
    >>> resolve_backend(None, "auto")
    'rs'
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "rs":
        return "rs"
    from pipelines.spark_session import delta_spark_available, is_local_master

    available = spark is not None and delta_spark_available(spark)
    if backend == "spark":
        if not available:
            raise DeltaIOError(
                "backend='spark' needs delta-spark on the JVM classpath and a SparkSession: run make "
                "setup (it fetches the jars into jars/) and build the session with delta=True, set "
                "DELTA_JARS to local jar paths, or pass delta_packages to build_session()"
            )
        return "spark"
    return "spark" if available and not is_local_master(_master(spark)) else "rs"


def _master(spark: SparkSession) -> str | None:
    context = getattr(spark, "sparkContext", None)
    return None if context is None else context.master


def _rs_table(path: str):
    import deltalake

    return deltalake.DeltaTable(str(path))


def deltalake_table_exists(path: str) -> bool:
    import deltalake

    return bool(deltalake.DeltaTable.is_deltatable(str(path)))


def _arrow_fs(uri: str):
    """(pyarrow filesystem, path in it) of a local path or a URI (s3a/s3n are read as s3)."""
    from urllib.parse import urlparse

    from pyarrow import fs as pafs

    u = urlparse(uri)
    if not u.scheme or u.scheme == "file":
        local = u.path if u.scheme == "file" else uri
        import os

        local = os.path.abspath(local)
        return pafs.LocalFileSystem(), local
    if u.scheme in ("s3a", "s3n"):
        uri = "s3" + uri[len(u.scheme):]
    return pafs.FileSystem.from_uri(uri)

