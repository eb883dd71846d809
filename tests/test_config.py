"""pipelines.config: YAML -> typed frozen dataclasses, every problem reported at once."""
from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest

from pipelines.config import ConfigError, PipelineConfig, TableFilter, load_config

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "conf" / "pipeline.yaml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_default_config_file_loads():
    cfg = load_config(REPO / "conf" / "pipeline.yaml")
    assert cfg.input == str(REPO / "samples" / "binlogs")
    assert cfg.warehouse == str(REPO / "warehouse")
    assert cfg.delete_mode == "hard"
    assert cfg.delta.backend == "auto"
    assert cfg.strict is False and cfg.accept_gaps is False
    assert cfg.spark.master == "local[2]"


def test_minimal_file_gets_defaults_and_relative_paths_resolve_against_the_file(tmp_path):
    p = write(tmp_path, "input: ../in\nwarehouse: wh\n")
    cfg = load_config(p)
    assert cfg.input == str(tmp_path / "in")
    assert cfg.warehouse == str(tmp_path / "conf" / "wh")
    assert cfg.tables == TableFilter()
    assert cfg.parallelism.target_bytes_per_task == 16 << 20
    assert cfg.source == str(p)


def test_uri_paths_are_kept(tmp_path):
    p = write(tmp_path, "input: s3a://bucket/binlogs\nwarehouse: hdfs://nn:8020/wh\nschema_seed: file:/seed\n")
    cfg = load_config(p)
    assert (cfg.input, cfg.warehouse, cfg.schema_seed) == ("s3a://bucket/binlogs", "hdfs://nn:8020/wh", "file:/seed")


def test_overrides_win_and_resolve_against_the_current_directory(tmp_path, monkeypatch):
    p = write(tmp_path, "input: in\nwarehouse: wh\nspark: {master: 'local[4]'}\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(p, {"input": "other", "warehouse": None, "spark.master": "local[1]"})
    assert cfg.input == str(tmp_path / "other")
    assert cfg.warehouse == str(tmp_path / "conf" / "wh")  # None means "not given"
    assert cfg.spark.master == "local[1]"


def test_full_file(tmp_path):
    p = write(
        tmp_path,
        """
input: /data/binlogs
warehouse: /data/wh
tables: {include: ["shop.*", "crm.customers"], exclude: ["*.tmp_*"]}
keys: {shop.events: [event_id, ts]}
delete_mode: soft
scd2: ["crm.*"]
strict: true
accept_gaps: true
schema_seed: seed
progress: false
parallelism: {target_bytes_per_task: 1048576, max_batch_bytes: 4194304}
delta: {backend: rs, packages: ["io.delta:delta-spark_2.13:4.0.0"]}
spark: {master: "local[2]", app_name: t, conf: {spark.sql.shuffle.partitions: 2, spark.ui.enabled: false}}
""",
    )
    cfg = load_config(p)
    assert cfg.tables.matches("shop", "orders")
    assert not cfg.tables.matches("shop", "tmp_x")
    assert cfg.tables.matches("crm", "customers") and not cfg.tables.matches("crm", "leads")
    assert cfg.key_override("shop", "events") == ("event_id", "ts")
    assert cfg.key_override("shop", "orders") is None
    assert cfg.delete_mode == "soft" and cfg.is_scd2("crm", "leads") and not cfg.is_scd2("shop", "x")
    assert cfg.strict and cfg.accept_gaps and not cfg.progress
    assert cfg.schema_seed == str(tmp_path / "conf" / "seed")
    assert cfg.parallelism.target_bytes_per_task == 1 << 20
    assert cfg.delta.backend == "rs"
    assert dict(cfg.spark.conf) == {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}
    assert cfg.pipeline_path("manifest") == "/data/wh/_pipeline/manifest"
    assert cfg.warehouse_path("silver", "shop", "orders") == "/data/wh/silver/shop/orders"


def test_config_is_frozen_and_picklable(tmp_path):
    cfg = load_config(write(tmp_path, "input: a\nwarehouse: b\n"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.strict = True  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    assert isinstance(cfg, PipelineConfig)


def test_every_problem_is_reported_at_once_with_file_key_and_expectation(tmp_path):
    p = write(
        tmp_path,
        """
warehouse: 7
tables: {include: shop, exclud: []}
keys: {"shop.*": [id], shop.t: []}
delete_mode: sometimes
strict: "yes"
parallelism: {target_bytes_per_task: 0}
delta: {backend: duckdb, packages: [delta]}
spark: {conf: {a: [1]}}
colour: blue
""",
    )
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    keys = {k for k, _ in ei.value.problems}
    assert keys == {
        "input", "warehouse", "tables.include", "tables.exclud", "keys.shop.*", "keys.shop.t",
        "delete_mode", "strict", "parallelism.target_bytes_per_task",
        "delta.backend", "delta.packages", "spark.conf.a", "colour",
    }
    text = str(ei.value)
    assert text.startswith(f"{p}: 13 problem(s)")
    assert "delete_mode: expected one of hard | soft, got 'sometimes'" in text
    assert "delta.backend: expected one of auto | spark | rs, got 'duckdb'" in text


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(write(tmp_path, "input: [unclosed\n"))
    with pytest.raises(ConfigError, match="expected a mapping at the top level"):
        load_config(write(tmp_path, "- a\n- b\n"))


def test_overrides_alone(tmp_path):
    cfg = load_config(None, {"input": str(tmp_path / "in"), "warehouse": str(tmp_path / "wh")})
    assert cfg.input == str(tmp_path / "in") and cfg.source == "<overrides>"


def test_time_zone_is_ignored_with_a_warning_that_says_what_sets_it(tmp_path, capsys):
    # (issue 36) it was validated and documented, and nothing read it: DATETIME is zone-less, TIMESTAMP
    # an instant; a reader's session time zone shows instants
    cfg = load_config(write(tmp_path, "input: a\nwarehouse: b\ntime_zone: Europe/Paris\n"))
    assert not hasattr(cfg, "time_zone")
    err = capsys.readouterr().err
    assert err.startswith("warning: ") and "time_zone ('Europe/Paris') is ignored" in err
    assert "spark.sql.session.timeZone" in err and len(err.splitlines()) == 1
    load_config(write(tmp_path, "input: a\nwarehouse: b\n"))
    assert capsys.readouterr().err == ""
