#!/usr/bin/env python
"""The whole pipeline: the bronze step, then the silver step, in one Spark session.

    spark-submit jobs/run_pipeline.py --config conf/pipeline.yaml [--binlog-dir DIR] [--warehouse DIR]
        [--lock-timeout SECONDS]
"""
import sys

import _bootstrap


def main(argv=None) -> int:
    from pipelines import bronze
    from pipelines.config import load_config

    args = _bootstrap.parse_args(__doc__, argv)
    cfg = load_config(args.config, _bootstrap.overrides(args))
    with _bootstrap.warehouse_lock(cfg, args):  # one run at a time per warehouse
        spark = _bootstrap.session(cfg)
        try:
            bronze.run(spark, cfg)
            from pipelines.silver import step as silver_step  # written separately; imported only when needed

            silver_step.run(spark, cfg)
            from pipelines import maintenance

            if maintenance.due(spark, cfg):  # maintenance.every_runs
                maintenance.run(spark, cfg)
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_bootstrap.main(main))
