"""Builds the optional compiled row decoder (``pipelines/binlog/_speedups.c``) and dump VALUES
reader (``pipelines/snapshot/_speedups.c``).

The project metadata lives in pyproject.toml. Without a C compiler the extension
is skipped (``optional=True``) and the pure-Python code is used.
"""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pipelines.binlog._speedups",
            ["pipelines/binlog/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "pipelines.snapshot._speedups",
            ["pipelines/snapshot/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
