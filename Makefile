# MySQL/MariaDB binlog -> Delta Lake CDC pipeline.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
APT_UPDATED := /tmp/.binlog-delta-apt-updated

.PHONY: setup system-deps test test-fast run bench sql fuzz clean

setup: system-deps $(STAMP)

# Java 17 (Spark 4) and mariadb-server (the test suite's private server), via apt when missing.
system-deps:
	@need=""; \
	if ! java -version 2>&1 | grep -q 'version "17'; then need="$$need openjdk-17-jdk-headless"; fi; \
	if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then need="$$need mariadb-server mariadb-client"; fi; \
	if [ -n "$$need" ]; then \
	  echo "installing:$$need"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need; \
	else echo "system packages present (java 17, mariadb-server)"; fi

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e . || $(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

test: setup
	$(PY) -m pytest -q -ra tests

run: setup
	$(PY) jobs/run_pipeline.py --config conf/pipeline.yaml

bench: setup
	$(PY) -m scripts.bench

sql: setup
	$(PY) -m pipelines.sql "$(Q)"

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build dist *.egg-info
