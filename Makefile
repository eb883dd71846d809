# MySQL/MariaDB binlog -> Delta Lake CDC pipeline.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
AIRFLOW_VENV  := .venv-airflow
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed
APT_UPDATED := /tmp/.binlog-delta-apt-updated

.PHONY: setup java system-deps jars jvm-archive spark-home test test-fast run bench sql fuzz clean package

setup: system-deps $(STAMP) $(AIRFLOW_STAMP) jars jvm-archive spark-home

# Java 17 (Spark 4), mariadb-server (the test suite's private server) and the Maven client
# (the jars below), via apt when missing. Set-up targets print nothing when there is nothing to do.
system-deps:
	@need=""; \
	if ! java -version 2>&1 | grep -q 'version "17'; then need="$$need openjdk-17-jdk-headless"; fi; \
	if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then need="$$need mariadb-server mariadb-client"; fi; \
	if ! command -v mvn >/dev/null 2>&1; then need="$$need maven"; fi; \
	if [ -n "$$need" ]; then \
	  echo "installing:$$need"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need; \
	fi

# Fetched once with the Maven client into jars/ (git-ignored), skipped when they are there
# (pipelines/delta_jars.py): delta-spark and delta-storage at the version of the pinned delta-spark
# package; for s3a:// paths, hadoop-aws at PySpark's Hadoop version and the AWS SDK bundle its POM
# declares (about 560 MB). Then the multi-driver Delta LogStore for S3 (pipelines/log_store.py) is
# compiled against them into jars/binlog-delta-logstore-<digest>.jar, unless that jar is there.
jars: $(STAMP)
	@$(PY) -m pipelines.delta_jars fetch
	@$(PY) -m pipelines.log_store build

# The driver JVM's class-data archive (pipelines/jvm_archive.py): a local job's Spark starts in
# about half the time. Made once per JDK and Spark version by a training run on the samples
# (about 30 s); without it jobs start as before, so a failed training run does not stop set-up.
jvm-archive: jars
	@$(PY) -m pipelines.jvm_archive create || true

$(STAMP): requirements.txt pyproject.toml setup.py pipelines/binlog/_speedups.c pipelines/snapshot/_speedups.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip "setuptools>=70.1"
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e . || $(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

# PySpark's launchers in the venv (.venv/bin/spark-submit, pyspark, spark-sql) find Spark, and run
# a job's driver, with the first python3 on PATH, which has no pyspark unless the venv is activated:
# `.venv/bin/spark-submit jobs/x.py` failed with "'NoneType' object has no attribute 'origin'" and
# "spark-class: No such file or directory" (exit 127). One line in their find-spark-home makes the
# venv's Python the default, and sources pipelines/jvm/submit-env.sh, which makes the driver JVM as
# quiet as a local job's (no INFO lines) while keeping any SPARK_SUBMIT_OPTS already set. A set
# PYSPARK_PYTHON wins. Silent, and done once (an older form of the line is replaced).
# VENV_BIN: another copy of the launchers (the test patches one).
VENV_BIN ?= $(VENV)/bin
VENV_PYTHON ?= $(abspath $(PY))
SUBMIT_ENV := $(CURDIR)/pipelines/jvm/submit-env.sh
SPARK_HOME_MARK := binlog-delta: the venv's Python, quiet (make spark-home, 2)
spark-home: | $(STAMP)
	@grep -qF "$(SPARK_HOME_MARK)" $(VENV_BIN)/find-spark-home || { sed -i '/binlog-delta: the venv/d' $(VENV_BIN)/find-spark-home && \
	  sed -i '1a export PYSPARK_PYTHON="$${PYSPARK_PYTHON:-$(VENV_PYTHON)}"; [ -f "$(SUBMIT_ENV)" ] \&\& . "$(SUBMIT_ENV)"  # $(subst ','"'"',$(SPARK_HOME_MARK))' $(VENV_BIN)/find-spark-home; }

# Airflow in its own venv (its pins clash with ours): tests/test_dag.py parses dags/ with it and
# runs the DAG with `airflow dags test`. Built anew when the pins change (no leftovers of the old set).
$(AIRFLOW_STAMP): requirements-airflow.txt
	rm -rf $(AIRFLOW_VENV)
	$(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/python -m pip install -q --upgrade pip
	$(AIRFLOW_VENV)/bin/python -m pip install -q -r requirements-airflow.txt
	$(AIRFLOW_VENV)/bin/python -m pip check
	touch $(AIRFLOW_STAMP)

# PYTEST_ARGS: e.g. make test PYTEST_ARGS="-k spark tests/test_delta_io.py" (default: every test)
# TEST_WORKERS: processes the tests are dealt to (pytest-xdist; 2 for CI's two cores: most tests
# wait on a JVM, a server or a job they started; 0 runs them in this one process)
# (-q unless PYTEST_ARGS asks for -v: make test PYTEST_ARGS="-v tests/test_config.py")
PYTEST_ARGS ?= tests
TEST_WORKERS ?= 2
PYTEST_QUIET = $(if $(filter -v -vv --verbose,$(PYTEST_ARGS)),,-q)
test: setup
	$(PY) -m pytest $(PYTEST_QUIET) -ra -n $(TEST_WORKERS) --dist worksteal --durations=25 $(PYTEST_ARGS)

# The main job on the samples needs Java 17 and the venv only: not MariaDB, Maven, the Delta jars
# (a local job on the delta-rs backend does without them), Airflow or the JVM archive (`make setup`).
java:
	@java -version 2>&1 | grep -q 'version "17' || { echo "installing: openjdk-17-jdk-headless"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless; }

run: java $(STAMP)
	$(PY) jobs/run_pipeline.py --config conf/pipeline.yaml

bench: setup
	$(PY) -m scripts.bench
	$(PY) -m scripts.snapshot_load_bench
	$(PY) -m scripts.history_bench
	$(PY) -m scripts.driver_bench
	$(PY) -m scripts.dv_bench
	$(PY) -m scripts.cluster_bench

# a silver table of 2M rows, MERGEs of a few rows with and without deletion vectors (delta-spark)
.PHONY: bench-dv
bench-dv: setup
	$(PY) -m scripts.dv_bench

# cold runs over many small tables and one big one, against replaying into a scratch MariaDB
.PHONY: bench-peer
bench-peer: setup
	$(PY) -m scripts.bench --peer-only --out .bench/results-peer.json

# a run's cost after 10, 1,000 and 5,000 runs of history, before and after maintenance
.PHONY: bench-history
bench-history: setup
	$(PY) -m scripts.history_bench $(HISTORY_ARGS)

# a table with a long history, before and after maintenance (delta-rs, no JVM)
.PHONY: bench-maintenance
bench-maintenance: setup
	$(PY) -m scripts.maintenance_bench

# compact, checkpoint and clean up logs, VACUUM every table of the configured warehouse
.PHONY: maintain
maintain: setup
	$(PY) jobs/maintain.py --config conf/pipeline.yaml

# Random server-oracle workloads: SEEDS seeds in each binlog_row_metadata x binlog_row_image mode,
# in batches of 20 that share a server (a database each) and the pipeline's runs; the batches take
# delta-rs and delta-spark in turn, and about one in five SIGKILLs the job once and runs it again.
# SOAK_JOBS processes run side by side, the modes dealt out among them (the same batches); each
# holds a Spark session of about 5 GB, and a job beside it while a batch SIGKILLs (3 fit in 24 GB).
# SOAK_ARGS: more options of tests/soak.py (--start, --batch, --mode, --backend, --kill, --steps, -v;
# --place s3: binlogs and warehouse on a private S3 server; --place overlap: two silver runs at once;
# --place dump: each batch starts from a mariadb-dump taken half-way, older binlogs never shipped).
SEEDS ?= 20
SOAK_JOBS ?= 1
.PHONY: soak
soak: setup
	$(PY) tests/soak.py --seeds $(SEEDS) --jobs $(SOAK_JOBS) $(SOAK_ARGS)

# A logical dump (DUMP=path: mariadb-dump/mysqldump output, plain, .gz or .zst; a --tab or mydumper folder) into the warehouse of
# conf/pipeline.yaml at the binlog position it records (docs/snapshots.md);
# LOAD_SNAPSHOT_ARGS: more flags of jobs/load_snapshot.py (--warehouse, --position FILE:POS, --debug).
.PHONY: load-snapshot
load-snapshot: setup
	@test -n "$(DUMP)" || { echo "usage: make load-snapshot DUMP=path/to/dump.sql [LOAD_SNAPSHOT_ARGS=...]" >&2; exit 2; }
	$(PY) jobs/load_snapshot.py --config conf/pipeline.yaml --dump "$(DUMP)" $(LOAD_SNAPSHOT_ARGS)

sql: setup
	$(PY) -m pipelines.sql "$(Q)"

# dist/binlog_delta.zip for spark-submit --py-files (pipelines/ + jobs/_bootstrap.py), a wheel,
# dist/jars.txt: the Maven coordinates of the jars a cluster needs (Delta, and hadoop-aws + the AWS
# SDK for s3a://), one a line, as fetched into jars/ (docs/deploy.md: --packages or --jars), and
# dist/binlog-delta-logstore.jar: the multi-driver Delta LogStore for S3 (docs/deploy.md, --jars).
package: $(STAMP) jars
	mkdir -p dist
	$(PY) -m pipelines.delta_jars list --out dist/jars.txt
	$(PY) -m pipelines.log_store package --out dist
	$(PY) -m pipelines.pyfiles --out dist/binlog_delta.zip --bootstrap jobs/_bootstrap.py
	$(PY) -m pip wheel -q --no-deps -w dist .

clean:
	rm -rf $(VENV) $(AIRFLOW_VENV) .pytest_cache .hypothesis build dist *.egg-info

fuzz: setup
	$(PY) -m scripts.fuzz --seconds $(or $(SECONDS),120)

# Load test: the pipeline over a 1 GB binlog file (LOAD_ARGS="--mode folder --gb 5" for a 5 GB folder);
# peak RSS of driver JVM / Python driver / workers, wall time, rows/s -> .bench/load.json.
.PHONY: load
load: setup
	$(PY) -m scripts.load_test $(LOAD_ARGS)
