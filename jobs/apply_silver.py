#!/usr/bin/env python
"""Silver step: MERGE the bronze changes into <warehouse>/silver/<database>/<table>.

    spark-submit jobs/apply_silver.py --config conf/pipeline.yaml [--binlog-dir DIR] [--warehouse DIR]
        [--lock-timeout SECONDS]
"""
import sys

import _bootstrap


def main(argv=None) -> int:
    from pipelines.silver import step as silver_step

    return _bootstrap.run_steps(__doc__, argv, silver_step.run)


if __name__ == "__main__":
    sys.exit(_bootstrap.main(main))
