"""``python -m pipelines imports [--packages]``: the package's import arrows and cycles
(:mod:`pipelines.import_graph`)."""
import sys

from pipelines.import_graph import main

if __name__ == "__main__":
    if sys.argv[1:2] != ["imports"]:
        sys.exit("usage: python -m pipelines imports [--packages]")
    sys.exit(main(sys.argv[2:]))
