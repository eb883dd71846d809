#!/usr/bin/env python
"""Bronze step: decode the new bytes of the binlog files into <warehouse>/bronze/binlog_changes.

    spark-submit jobs/ingest_bronze.py --config conf/pipeline.yaml [--binlog-dir DIR] [--warehouse DIR]
        [--lock-timeout SECONDS]
"""
import sys

import _bootstrap


def main(argv=None) -> int:
    from pipelines import bronze

    return _bootstrap.run_steps(__doc__, argv, bronze.run)


if __name__ == "__main__":
    sys.exit(_bootstrap.main(main))
