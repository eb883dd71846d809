#!/usr/bin/env python
"""Bronze step: decode the new bytes of the binlog files into <warehouse>/bronze/binlog_changes.

    spark-submit jobs/ingest_bronze.py --config conf/pipeline.yaml [--binlog-dir DIR] [--warehouse DIR]
        [--lock-timeout SECONDS]
"""
import sys

import _bootstrap


def _bronze(spark, cfg) -> None:
    from pipelines import bronze  # imported once the input was checked: a mistake costs no import time

    bronze.run(spark, cfg)


def main(argv=None) -> int:
    return _bootstrap.run_steps(__doc__, argv, _bronze, reads_input=True)


if __name__ == "__main__":
    sys.exit(_bootstrap.main(main))
