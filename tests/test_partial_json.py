"""MySQL 8 partial JSON (``binlog_row_value_options=PARTIAL_JSON`` with ``binlog_row_image=MINIMAL``):
an update logs a JSON column as diffs, and its before image does not hold the document. Bronze
keeps the diffs (marked); silver must hold the whole document, as the server does: the diffs
applied per key in ``_seq`` order to the document just before, whether that came earlier in the
same batch (diffs included) or from silver's stored row in a later run.

The binlog is built from bytes (a MySQL 8.0 FORMAT_DESCRIPTION, QUERY, TABLE_MAP, rows events
and PARTIAL_UPDATE_ROWS) with the event builders; MariaDB does not write these events. The
expected documents are written out by hand from MySQL's rules (``JSON_SET``/``JSON_INSERT``/
``JSON_REMOVE`` on the documents; object keys sorted by length, then bytes)."""
from __future__ import annotations

import event_builders as eb
import pytest
from spark_fixtures import require_delta_spark, spark  # noqa: F401  (the shared session fixture)
from test_columns import encode_row, int_col
from test_jsonb import diff, diff_vector
from test_rows import after_image, json_col

from pipelines import bronze, delta_io
from pipelines.silver import step as silver_step
from pipelines.binlog import jsonb as J
from pipelines.binlog.constants import ColumnType as CT, EventType as E
from pipelines.config import load_config
from pipelines.paths import silver_table_path
from pipelines.silver.changes import fold_json_diffs

COLS = [int_col(CT.LONG, 4, False), json_col(), int_col(CT.LONG, 4, False)]  # id, doc, n
TID = 77
ALL, KEY, DOC, N = (1, 1, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1)


def _idx(bits) -> tuple[int, ...]:
    return tuple(i for i, b in enumerate(bits) if b)


def _table_map() -> tuple:
    # MINIMAL row metadata (MySQL's default): names, key and signedness come from the DDL
    return (E.TABLE_MAP, eb.table_map(TID, "db", "t", [CT.LONG, CT.JSON, CT.LONG], b"\x04", [False, True, True]))


def _txn(*rows_events) -> list[tuple]:
    """One transaction; only its last rows event ends the statement (STMT_END_F frees the table map)."""
    last = len(rows_events) - 1
    events = [(code, make(1 if k == last else 0)) for k, (code, make) in enumerate(rows_events)]
    return [(E.QUERY, eb.query("BEGIN", schema="db")), _table_map(), *events, (E.XID, eb.xid(1))]


def insert(*rows) -> tuple:
    body = b"".join(encode_row(COLS, (0, 1, 2), list(r)) for r in rows)
    return (E.WRITE_ROWS, lambda flags: eb.rows(TID, 3, ALL, body, flags=flags))


def delete(*ids) -> tuple:
    body = b"".join(encode_row(COLS, (0,), [i]) for i in ids)
    return (E.DELETE_ROWS, lambda flags: eb.rows(TID, 3, KEY, body, flags=flags))


def set_n(key: int, n: int) -> tuple:
    body = encode_row(COLS, (0,), [key]) + encode_row(COLS, (2,), [n])
    return (E.UPDATE_ROWS, lambda flags: eb.rows(TID, 3, KEY, body, present_after=N, flags=flags))


def set_doc(key: int, doc) -> tuple:
    body = encode_row(COLS, (0,), [key]) + encode_row(COLS, (1,), [doc])
    return (E.UPDATE_ROWS, lambda flags: eb.rows(TID, 3, KEY, body, present_after=DOC, flags=flags))


def diffs(key: int, *vector: bytes) -> tuple:
    """A PARTIAL_UPDATE_ROWS row: the key in the before image, the doc's diffs in the after image."""
    body = encode_row(COLS, (0,), [key]) + after_image(COLS, (1,), ["diff"], {1: diff_vector(*vector)}, json_bits=1)
    return (E.PARTIAL_UPDATE_ROWS, lambda flags: eb.rows(TID, 3, KEY, body, present_after=DOC, flags=flags))


FIRST = [
    (E.QUERY, eb.query("CREATE TABLE t (id INT PRIMARY KEY, doc JSON, n INT)", schema="db")),
    *_txn(insert((1, {"a": 1, "b": [1]}, 10), (2, {"x": "y"}, 20), (3, [1, 2], 30))),
    *_txn(diffs(1, diff(J.REPLACE, "$.a", 2))),
    *_txn(diffs(1, diff(J.INSERT, "$.c", "new")), set_n(2, 21)),  # a chain: diffs on diffs
    *_txn(set_doc(3, {"z": 0}), diffs(3, diff(J.INSERT, "$.w", True))),  # diffs on a whole value
    *_txn(set_n(1, 11), delete(2), insert((2, {"fresh": 1}, 22)), diffs(2, diff(J.REMOVE, "$.fresh"))),
]
AFTER_FIRST = {1: ('{"a": 2, "b": [1], "c": "new"}', 11), 2: ("{}", 22), 3: ('{"w": true, "z": 0}', 30)}
# a later run: the documents come from silver's stored rows
SECOND = [
    *_txn(diffs(1, diff(J.REPLACE, "$.b[0]", 5)), diffs(3, diff(J.REMOVE, "$.z"))),
    *_txn(diffs(1, diff(J.INSERT, "$.b[1]", [6]), diff(J.REPLACE, "$.a", "two"))),
]
AFTER_SECOND = {1: ('{"a": "two", "b": [5, [6]], "c": "new"}', 11), 2: ("{}", 22), 3: ('{"w": true}', 30)}


def test_fold_applies_chains_and_keeps_documents_not_logged():
    r = '[{"op": "REPLACE", "path": "$.a", "value": "2"}]'
    i = '[{"op": "INSERT", "path": "$.b", "value": "[]"}]'
    chain = [
        (1, "3", "upsert", ('{"a": 1}',), (False,), (i,)),  # filled with the stored value: stale
        (0, "", "stored", ('{"a": 1}',), (True,), (None,)),
        (1, "1", "upsert", ('{"a": 1}',), (False,), (r,)),
        (1, "2", "upsert", ('{"a": 1}',), (False,), (None,)),  # another column changed
        (1, "4", "delete", ('{"a": 2, "b": []}',), (False,), (None,)),
        (1, "5", "upsert", ('{"q": 0}',), (True,), (None,)),
        (1, "6", "upsert", ('{"q": 0}',), (False,), (i,)),
    ]
    assert fold_json_diffs(chain, 1) == [
        ("1", "upsert", ('{"a": 2}',)), ("2", "upsert", ('{"a": 2}',)), ("3", "upsert", ('{"a": 2, "b": []}',)),
        ("4", "delete", ('{"a": 2, "b": []}',)), ("5", "upsert", ('{"q": 0}',)), ("6", "upsert", ('{"b": [], "q": 0}',)),
    ]
    # a document silver never saw stays NULL, like any column a partial image lacks
    assert fold_json_diffs([(1, "1", "upsert", (None,), (False,), (r,))], 1) == [("1", "upsert", (None,))]
    # and so does one the diffs do not fit (silver's document is not the server's: history it never saw)
    assert fold_json_diffs([(1, "1", "upsert", ("[]",), (False,), (r,))], 1) == [("1", "upsert", (None,))]


@pytest.mark.spark
@pytest.mark.parametrize("backend", ["rs", "spark"])
def test_silver_holds_the_whole_document(spark, tmp_path, backend):  # noqa: F811
    if backend == "spark":
        require_delta_spark(spark)
    folder = tmp_path / "binlogs"
    folder.mkdir()
    binlog = folder / "binlog.000001"
    cfg = load_config(None, {"input": str(folder), "warehouse": str(tmp_path / "wh"), "progress": False,
                             "delta.backend": backend})
    path = silver_table_path(cfg.warehouse, "db", "t")

    def silver() -> dict:
        return {r["id"]: (r["doc"], r["n"]) for r in delta_io.open_table(path).read_arrow().to_pylist()
                if not r["_deleted"]}

    binlog.write_bytes(eb.binlog_file(FIRST))
    b = bronze.run(spark, cfg)
    assert b.status == "ok" and b.quarantined == 0, b.summary()
    cells = [c for r in delta_io.open_table(cfg.warehouse_path("bronze/binlog_changes")).read_arrow().to_pylist()
             for c in (r["after"] or []) if c["bin"] == b"binlog-delta:partial-json"]
    assert len(cells) == 4 and '"op": "REPLACE"' in cells[0]["text"]  # bronze keeps the diffs, marked
    s = silver_step.run(spark, cfg)
    assert s.status == "ok" and s.quarantined == 0, s.summary()
    assert silver() == AFTER_FIRST

    binlog.write_bytes(eb.binlog_file(FIRST + SECOND))  # the server appended to the file
    assert bronze.run(spark, cfg).status == "ok"
    s = silver_step.run(spark, cfg)
    assert s.status == "ok" and s.quarantined == 0, s.summary()
    assert silver() == AFTER_SECOND
    # a re-run changes nothing
    assert bronze.run(spark, cfg).files == 0 and silver_step.run(spark, cfg).segments == 0
    assert silver() == AFTER_SECOND
