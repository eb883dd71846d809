"""The training run of the driver JVM's class-data archive (:mod:`pipelines.jvm_archive`), in a
process of its own: ``python -m pipelines.jvm_training DEST`` runs the pipeline on the committed
samples, on both Delta backends, in a JVM that dumps the classes it loaded to ``DEST`` when it
exits. Kept apart from :mod:`pipelines.jvm_archive`, which the session builder imports, because it
imports the bronze and silver steps: the archive's options never reach back up to them."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from pipelines import bronze
from pipelines.config import load_config
from pipelines.jvm_archive import QUIET_CDS, REPO
from pipelines.silver import step as silver_step
from pipelines.spark_session import build_session
from pipelines.spark_settings import LOCAL_DEFAULTS


def train(dump_to: Path) -> None:
    """The training run (in its own process): the pipeline on the samples, on both backends, in a
    JVM that dumps the classes it loaded to ``dump_to`` when it exits; waits for that exit."""
    options = f"{LOCAL_DEFAULTS['spark.driver.extraJavaOptions']} -XX:ArchiveClassesAtExit={dump_to} {QUIET_CDS}"
    spark = build_session("binlog-delta-jvm-archive", "local[2]",
                          extra_conf={"spark.driver.extraJavaOptions": options}, delta=True)
    proc = spark.sparkContext._gateway.proc
    with tempfile.TemporaryDirectory(prefix="jvm-archive-wh-") as wh:
        for backend in ("rs", "spark"):
            cfg = load_config(REPO / "conf" / "pipeline.yaml",
                              {"warehouse": f"{wh}/{backend}", "progress": False, "delta.backend": backend})
            bronze.run(spark, cfg)
            silver_step.run(spark, cfg)
        spark.stop()
    proc.stdin.close()  # the gateway JVM exits when its stdin closes, and dumps on its way out
    if proc.wait(timeout=600):
        raise RuntimeError(f"the training JVM exited with {proc.returncode}")


if __name__ == "__main__":
    train(Path(sys.argv[1]))
