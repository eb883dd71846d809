"""Spark's Python workers keep the directories of the zips on their path between tasks
(:mod:`pipelines.worker_zips`), and still find a zip added later."""
from __future__ import annotations

import zipfile
import zipimport

from pipelines import worker_zips
from spark_fixtures import spark  # noqa: F401


def test_workers_keep_zip_directories_and_find_a_zip_added_later(spark, tmp_path):
    def _worker_state(_):  # (defined here: a task function is pickled by value, tests/ is not on the workers' path)
        import zipimport as z

        import pipelines  # noqa: F401  (what each of the pipeline's tasks imports first)
        from pipelines import worker_zips as w

        yield (w.in_spark_worker(), z.zipimporter.invalidate_caches is w._keep_directory)

    sc = spark.sparkContext
    assert set(sc.parallelize(range(4), 4).mapPartitions(_worker_state).collect()) == {(True, True)}
    assert not worker_zips.in_spark_worker()  # the driver is left as it is
    assert zipimport.zipimporter.invalidate_caches is not worker_zips._keep_directory
    added = tmp_path / "late_module_zip.zip"
    with zipfile.ZipFile(added, "w") as z:
        z.writestr("late_module_in_zip.py", "VALUE = 42\n")
    sc.addPyFile(str(added))

    def late(_):
        import late_module_in_zip

        yield late_module_in_zip.VALUE

    assert sc.parallelize(range(4), 4).mapPartitions(late).collect() == [42] * 4


def test_keeping_is_applied_once():
    saved = zipimport.zipimporter.invalidate_caches
    try:
        assert worker_zips.keep_zip_directories() is True
        assert worker_zips.keep_zip_directories() is False
        assert zipimport.zipimporter.invalidate_caches is worker_zips._keep_directory
    finally:
        zipimport.zipimporter.invalidate_caches = saved
