#!/usr/bin/env python
"""Silver step: MERGE the bronze changes into <warehouse>/silver/<database>/<table>.

    spark-submit jobs/apply_silver.py --config conf/pipeline.yaml [--binlog-dir DIR] [--warehouse DIR]
        [--lock-timeout SECONDS]
"""
import sys

import _bootstrap


def main(argv=None) -> int:
    from pipelines.silver import step as silver_step
    from pipelines.config import load_config

    args = _bootstrap.parse_args(__doc__, argv)
    cfg = load_config(args.config, _bootstrap.overrides(args))
    with _bootstrap.warehouse_lock(cfg, args):  # one run at a time per warehouse
        spark = _bootstrap.session(cfg)
        try:
            silver_step.run(spark, cfg)
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_bootstrap.main(main))
