#!/usr/bin/env python
"""Load logical dumps (mysqldump / mariadb-dump: plain, gzip or zstd files, or --tab folders) into the
warehouse at their binlog position; the pipeline's jobs then apply the binlogs from there.

    spark-submit jobs/load_snapshot.py --dump PATH [--dump PATH ...] --warehouse DIR [--config FILE]
        [--position FILE:POS | --gtid SET] [--debug] [--lock-timeout SECONDS]
"""
import sys

import _bootstrap


def _flags(p) -> None:
    p.add_argument("--dump", action="append", required=True, metavar="PATH", help="a dump file or --tab folder (repeatable)")
    p.add_argument("--position", metavar="FILE:POS", help="the snapshot's binlog position, when the dump has none")
    p.add_argument("--gtid", metavar="SET", help="the snapshot's GTID set, when the dump has no position")


def main(argv=None) -> int:
    from pipelines import snapshot_load

    return _bootstrap.run_steps(__doc__, argv, lambda spark, cfg, args: snapshot_load.run(
        spark, cfg, args.dump, position=args.position, gtid=args.gtid), extra=_flags, with_args=True)


if __name__ == "__main__":
    sys.exit(_bootstrap.main(main))
