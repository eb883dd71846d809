#!/usr/bin/env python
"""Warehouse upkeep: compact small files, checkpoint and clean up the Delta logs, VACUUM
(see pipelines/maintenance.py). Safe to run at any time: what the tables return is unchanged.

    spark-submit jobs/maintain.py --config conf/pipeline.yaml [--warehouse DIR] [--retention-hours H]
        [--lock-timeout SECONDS]
"""
import sys

import _bootstrap


def _flags(p) -> None:
    p.add_argument("--retention-hours", type=int, metavar="H",
                   help="VACUUM keeps files that versions of the last H hours use; overrides "
                        "'maintenance.retention_hours' (default 168, Delta's 7 days)")


def main(argv=None) -> int:
    from pipelines import maintenance
    from pipelines.config import load_config

    args = _bootstrap.parse_args(__doc__, argv, _flags)
    cfg = load_config(args.config, {**_bootstrap.overrides(args), "maintenance.retention_hours": args.retention_hours})
    with _bootstrap.warehouse_lock(cfg, args):  # never beside a run that writes the same tables
        spark = _bootstrap.session(cfg)
        try:
            maintenance.run(spark, cfg)
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_bootstrap.main(main))
