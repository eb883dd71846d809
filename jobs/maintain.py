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

    return _bootstrap.run_steps(__doc__, argv, maintenance.run, extra=_flags,
                                settings=lambda args: {"maintenance.retention_hours": args.retention_hours})


if __name__ == "__main__":
    sys.exit(_bootstrap.main(main))
