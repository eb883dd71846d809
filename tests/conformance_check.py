"""Holding our decoder to ``mariadb-binlog -vvv`` output, row value by row value
(shared by the corpus conformance tests and the live-server tests)."""
from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

from binlog_text import iter_rows, parse_value
from pipelines.binlog.charsets import codec_for_collation
from pipelines.binlog.constants import ColumnType
from pipelines.binlog.events import RowsEvent
from pipelines.binlog.stream import EventStream

_STRINGISH = {ColumnType.STRING, ColumnType.VAR_STRING, ColumnType.VARCHAR, ColumnType.BLOB,
              ColumnType.TINY_BLOB, ColumnType.MEDIUM_BLOB, ColumnType.LONG_BLOB, ColumnType.GEOMETRY}
# MariaDB 5.3 fractional temporal types: mariadb-binlog itself cannot print them (README: known gap)
_KNOWN_GAP_TABLES = {("corpus", "t_oldtime")}


def decoded_rows(path: Path, table_map_hook=None):
    """Our row changes in file order: (op, db, table, before, after, table_map, cols_b, cols_a)."""
    out = []
    with EventStream(path, table_map_hook=table_map_hook) as s:
        for ev in s.events():
            if type(ev) is RowsEvent and ev.table_map is not None:
                tm = ev.table_map
                for b, a in ev.rows:
                    out.append((ev.op, tm.schema, tm.table, b, a, tm, ev.columns_before, ev.columns_after))
    return out


def _as_bytes(v, tm, i):
    if isinstance(v, bytes):
        return v
    cs = tm.column_charsets[i] if tm.column_charsets else None
    codec = codec_for_collation(cs) if cs is not None else "utf-8"
    return v.encode(codec or "latin-1", "surrogateescape")


def _same(ours, text, tc, tm, i) -> bool:
    """Does our decoded value equal the printed ground truth?"""
    unsigned = bool(tm.signedness and tm.signedness[i])
    truth = parse_value(text, tc, unsigned=unsigned)
    if truth is None or ours is None:
        return truth is None and ours is None
    t = tm.column_types[i]
    real = tm.real_types[i] if getattr(tm, "real_types", None) else t
    name = tc.name
    if name == "FLOAT":
        return float(f"{ours:.6g}") == truth or math.isclose(ours, truth, rel_tol=1e-5)
    if name == "DOUBLE":
        return ours == truth or math.isclose(ours, truth, rel_tol=1e-14)
    if name == "DECIMAL":
        return isinstance(ours, Decimal) and ours == truth
    if name == "ENUM":
        if isinstance(ours, str):
            values = tm.enum_values[i]
            return (0 if ours == "" else values.index(ours) + 1) == truth
        return ours == truth
    if name == "SET":
        if isinstance(ours, str):
            values = tm.set_values[i]
            mask = 0
            for m in filter(None, ours.split(",")):
                mask |= 1 << values.index(m)
            return mask == truth
        return ours == truth
    if t in _STRINGISH and isinstance(truth, bytes):
        got = _as_bytes(ours, tm, i)
        if real == ColumnType.STRING:  # CHAR/BINARY: the tool strips the padding
            return got.rstrip(b"\0 ") == truth.rstrip(b"\0 ")
        return got == truth
    return ours == truth


def _compare_image(ours_vals, cols, truth_img, truth_types, tm, where: str) -> list[str]:
    bad = []
    if truth_img is None:
        return [] if ours_vals is None else [f"{where}: we have an image the tool does not"]
    ours = dict(zip(cols, ours_vals))
    if sorted(c + 1 for c in ours) != sorted(truth_img):
        return [f"{where}: columns {sorted(c + 1 for c in ours)} != {sorted(truth_img)}"]
    for n, text in truth_img.items():
        if not _same(ours[n - 1], text, truth_types[n], tm, n - 1):
            bad.append(f"{where} @{n}: ours {ours[n - 1]!r} != truth {text!r} ({truth_types[n]})")
    return bad


def check_rows(path: Path, truth_events: list[dict], partial: bool = False, skip_tables=_KNOWN_GAP_TABLES,
               table_map_hook=None):
    """Assert our row changes of ``path`` equal the parsed mariadb-binlog text, row by row."""
    name = path.name
    truth = list(iter_rows(truth_events))
    ours = decoded_rows(path, table_map_hook)
    problems = []
    ti = 0
    for k, (op, db, table, b, a, tm, cb, ca) in enumerate(ours):
        if (db, table) in skip_tables:
            continue  # the tool stops at these rows; checked against final_state elsewhere
        if ti >= len(truth):
            if partial:
                break
            problems.append(f"row {k}: we decoded more rows than the tool printed")
            break
        t = truth[ti]
        ti += 1
        where = f"{name} row {k} {op} `{db}`.`{table}`"
        if (op, db, table) != (t["op"], t["db"], t["table"]):
            problems.append(f"{where}: truth is {t['op']} `{t['db']}`.`{t['table']}`")
            break
        problems += _compare_image(b, cb, t["before"], t["before_types"], tm, where + " before")
        problems += _compare_image(a, ca, t["after"], t["after_types"], tm, where + " after")
    if not any((r["db"], r["table"]) in skip_tables for r in truth):
        assert ti == len(truth), f"the tool printed {len(truth)} rows, we matched {ti}"
    assert not problems, "\n".join(problems[:30])
