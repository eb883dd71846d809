"""Text whose bytes are not valid in its declared charset: cp1251 on a utf8 connection, as old
PHP applications sent it (a real WordPress server's binlogs held such statements). A private
MariaDB writes statements, a user variable, an annotated statement and row values with a
marker of the same length; the marker's bytes are then turned into "Регистрация" in cp1251
(:func:`binlog_surgery.replace_bytes`). Nothing may stop: the decoder gives the text with
visible replacements and keeps the bytes, ``dump --format jsonl`` stays valid UTF-8 JSON, and
the pipeline lands everything on both backends, the bytes beside the text, counted, exactly once.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from binlog_surgery import replace_bytes
from spark_fixtures import require_delta_spark, spark  # noqa: F401  (the shared session fixture)

from pipelines import bronze, delta_io
from pipelines.silver import step as silver_step
from pipelines.binlog.changes import RowChange, StatementChange, iter_changes
from pipelines.binlog.events import AnnotateRowsEvent, QueryEvent, RowsQueryEvent, UserVarEvent
from pipelines.binlog.stream import EventStream
from pipelines.binlog.txindex import scan
from pipelines.binlog.values import InvalidText
from pipelines.config import load_config
from pipelines.paths import silver_table_path

pytestmark = [pytest.mark.mariadb]

MARKER = b"MARKERMARKE"
CP1251 = "Регистрация".encode("cp1251")
assert len(MARKER) == len(CP1251) == 11
REPLACED = "\ufffd" * 11  # what the text shows where the bytes are not UTF-8

WORKLOAD = f"""
SET NAMES utf8;
CREATE DATABASE w CHARACTER SET utf8mb4;
CREATE TABLE w.posts (id INT PRIMARY KEY, title VARCHAR(40) CHARACTER SET utf8mb4, note VARCHAR(20)) COMMENT '{MARKER.decode()}';
INSERT INTO w.posts VALUES (1, '{MARKER.decode()}', 'ok'), (2, 'plain', '{MARKER.decode()}');
UPDATE w.posts SET note = 'changed' WHERE id = 1;
CREATE TABLE w.log (id INT AUTO_INCREMENT PRIMARY KEY, b VARBINARY(20));
SET SESSION binlog_format = STATEMENT;
SET @v = '{MARKER.decode()}';
INSERT INTO w.log (b) VALUES (@v), ('{MARKER.decode()}');
"""


@pytest.fixture(scope="module")
def binlogs(tmp_path_factory):
    from mariadb_server import MariaDBServer, mariadb_available

    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("charset")
    srv = MariaDBServer(root / "mariadb", row_metadata="FULL").start()
    try:
        first = srv.flush_logs()
        srv.sql(WORKLOAD)
        srv.flush_logs()
        files = srv.binlog_files()
        folder = root / "binlogs"
        folder.mkdir()
        for f in files[files.index(first):-1]:
            data = replace_bytes(f.read_bytes(), MARKER, CP1251)
            (folder / f.name).write_bytes(data)
    finally:
        srv.stop()
    assert any(CP1251 in f.read_bytes() for f in folder.iterdir())
    return folder


def test_the_decoder_keeps_the_bytes(binlogs):
    kinds = set()
    for path in sorted(binlogs.iterdir()):
        with EventStream(str(path)) as s:
            for ev in s.events():
                text = getattr(ev, "query", None) if isinstance(ev, (QueryEvent, RowsQueryEvent, AnnotateRowsEvent)) else None
                if isinstance(ev, UserVarEvent):
                    text = ev.value
                if isinstance(text, InvalidText):
                    assert CP1251 in text.raw and REPLACED in text
                    kinds.add(type(ev).__name__)
        for ch in iter_changes(str(path), scan(str(path))):
            if isinstance(ch, RowChange) and ch.after is not None:
                bad = [v for v in ch.after if isinstance(v, InvalidText)]
                if bad:
                    assert bad[0].raw == CP1251 and bad[0] == REPLACED
                    kinds.add("row value")
            if isinstance(ch, StatementChange) and isinstance(ch.query, InvalidText):
                kinds.add("statement change")
    assert kinds >= {"QueryEvent", "AnnotateRowsEvent", "UserVarEvent", "row value", "statement change"}


def test_dump_jsonl_is_valid_utf8_json_with_the_bytes_as_hex(binlogs):
    for path in sorted(binlogs.iterdir()):
        for fmt in ("jsonl", "text"):
            r = subprocess.run([sys.executable, "-m", "pipelines.binlog", "dump", "--format", fmt, str(path)],
                               capture_output=True, timeout=120)
            assert r.returncode == 0, r.stderr.decode(errors="replace")
            text = r.stdout.decode("utf-8")  # strict: every byte is UTF-8
            if fmt == "text":
                continue
            for line in text.splitlines():
                ev = json.loads(line)
                if "query_hex" in ev:
                    assert CP1251.hex() in ev["query_hex"] and REPLACED in ev["query"]
                for row in ev.get("rows", []):
                    for image in (row["before"], row["after"]):
                        for v in (image or {}).values():
                            if isinstance(v, dict) and "text" in v:
                                assert v == {"text": REPLACED, "hex": CP1251.hex(), "charset": "utf-8"}


@pytest.mark.spark
@pytest.mark.parametrize("backend", ["rs", "spark"])
def test_the_pipeline_lands_everything_with_the_bytes(spark, binlogs, tmp_path, backend):  # noqa: F811
    if backend == "spark":
        require_delta_spark(spark)
    cfg = load_config(None, {"input": str(binlogs), "warehouse": str(tmp_path / "wh"), "progress": False,
                             "delta.backend": backend})
    b = bronze.run(spark, cfg)
    assert b.status == "ok" and b.invalid_text >= 4, b.summary()  # 2 row values, 2+ statements
    assert "not valid in their charset" in b.summary()
    s = silver_step.run(spark, cfg)
    assert s.status == "ok", s.summary()
    # bronze: the text with replacements, the exact bytes beside it
    cells = [c for r in delta_io.open_table(cfg.warehouse_path("bronze/binlog_changes")).read_arrow().to_pylist()
             for c in (r["after"] or []) if c["bin"] == CP1251]
    assert len(cells) == 3 and all(c["text"] == REPLACED for c in cells)  # two inserts, the update
    ddl = delta_io.open_table(cfg.pipeline_path("ddl")).read_arrow().to_pylist()
    raws = [r for r in ddl if r["query_raw"] is not None]
    assert raws and all(CP1251 in r["query_raw"] and REPLACED in r["query"] for r in raws)
    assert any(r["query"].startswith("CREATE TABLE") for r in raws)  # the DDL still made a schema
    # silver: the text as it could be read, the rows all there
    posts = {r["id"]: r
             for r in delta_io.open_table(silver_table_path(cfg.warehouse, "w", "posts")).read_arrow().to_pylist()}
    assert (posts[1]["title"], posts[1]["note"]) == (REPLACED, "changed")
    assert (posts[2]["title"], posts[2]["note"]) == ("plain", REPLACED)
    # a re-run changes nothing
    again = bronze.run(spark, cfg)
    assert again.files == 0 and silver_step.run(spark, cfg).segments == 0
