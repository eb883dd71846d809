#!/usr/bin/env python
"""The whole pipeline: the bronze step, then the silver step, in one Spark session.

    spark-submit jobs/run_pipeline.py --config conf/pipeline.yaml [--binlog-dir DIR] [--warehouse DIR]
        [--lock-timeout SECONDS]
"""
import sys

import _bootstrap


def _silver_then_upkeep(spark, cfg) -> None:
    from pipelines import maintenance
    from pipelines.silver import step as silver_step  # written separately; imported only when needed

    silver_step.run(spark, cfg)
    if maintenance.due(spark, cfg):  # maintenance.every_runs
        maintenance.run(spark, cfg)


def _bronze(spark, cfg) -> None:
    from pipelines import bronze  # imported once the input was checked: a mistake costs no import time

    bronze.run(spark, cfg)


def main(argv=None) -> int:
    return _bootstrap.run_steps(__doc__, argv, _bronze, _silver_then_upkeep, reads_input=True)


if __name__ == "__main__":
    sys.exit(_bootstrap.main(main))
