"""MySQL/MariaDB binlog -> Delta Lake CDC pipeline."""
import os as _os
import sys as _sys

# Arrow's memory pool: jemalloc (pipelines.arrow_pool). Arrow reads its variable once, when
# pyarrow is first imported, and its readers and file systems allocate from that pool whatever
# pyarrow's default is set to later: so it is chosen here, before this package imports pyarrow
# (pyarrow's Linux wheels have jemalloc).
if _sys.platform.startswith("linux"):
    _os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
