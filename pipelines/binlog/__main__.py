"""Command line: ``python -m pipelines.binlog dump|bench ...`` (see cli.py)."""
import sys

from .cli import main

sys.exit(main())
