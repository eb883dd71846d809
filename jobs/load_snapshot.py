#!/usr/bin/env python
"""Load logical dumps (mysqldump / mariadb-dump: plain, gzip or zstd files, or --tab folders; mydumper folders) into the
warehouse at their binlog position; the pipeline's jobs then apply the binlogs from there.

    spark-submit jobs/load_snapshot.py --dump PATH [--dump PATH ...] --warehouse DIR [--config FILE]
        [--position FILE:POS | --gtid SET] [--debug] [--lock-timeout SECONDS]
"""
import sys

import _bootstrap


def _flags(p) -> None:
    p.add_argument("--dump", action="append", required=True, metavar="PATH", help="a dump file, --tab folder or mydumper folder (repeatable)")
    p.add_argument("--position", metavar="FILE:POS", help="the snapshot's binlog position, when the dump has none")
    p.add_argument("--gtid", metavar="SET", help="the snapshot's GTID set, when the dump has no position")


def _dumps_exist(args) -> None:
    from pipelines.preflight import check_dumps

    check_dumps(args.dump)


def main(argv=None) -> int:
    def load(spark, cfg, args) -> None:
        from pipelines import snapshot_load

        snapshot_load.run(spark, cfg, args.dump, position=args.position, gtid=args.gtid)

    return _bootstrap.run_steps(__doc__, argv, load, extra=_flags, with_args=True, checks=_dumps_exist)


if __name__ == "__main__":
    sys.exit(_bootstrap.main(main))
