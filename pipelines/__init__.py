"""MySQL/MariaDB binlog -> Delta Lake CDC pipeline."""
import os as _os
import sys as _sys

# Arrow's memory pool: jemalloc (pipelines.arrow_pool). Arrow reads its variable once, when
# pyarrow is first imported, and its readers and file systems allocate from that pool whatever
# pyarrow's default is set to later: so it is chosen here, before this package imports pyarrow
# (pyarrow's Linux wheels have jemalloc).
if _sys.platform.startswith("linux"):
    _os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")

# In a Spark Python worker, the zip importers on its path (pyspark.zip, the --py-files zip) keep
# the directory they read instead of re-reading it before every task (pipelines.worker_zips).
if "pyspark.worker_util" in _sys.modules:
    from pipelines.worker_zips import keep_zip_directories as _keep_zip_directories

    _keep_zip_directories()
