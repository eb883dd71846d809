"""``dump``: print decoded events as ``mysqlbinlog -vv``-like text or as JSON lines.

The jsonl form is a contract other tools read: one object per event with at
least ``file``, ``pos``, ``end_pos``, ``type_code`` and ``type``; a rows event
adds ``db``, ``table``, ``op`` and ``rows`` (``[{"before": {...}|null,
"after": {...}|null}]`` keyed by column name, or ``@1``, ``@2``… when names are
unknown); events unpacked from a transaction payload carry ``"in_payload": true``.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from typing import IO, Iterable

from .constants import OP_DELETE, OP_INSERT, OP_UPDATE, ColumnType, column_type_name, event_type_name
from .events import RowsEvent, TableMapEvent, UnknownEvent
from .values import InvalidText, json_value

_SKIP_FIELDS = {"header", "table_map", "rows", "raw", "events", "body", "query_bytes"}


_FSP_TYPES = frozenset(
    {ColumnType.TIME2, ColumnType.DATETIME2, ColumnType.TIMESTAMP2,
     ColumnType.TIME, ColumnType.DATETIME, ColumnType.TIMESTAMP}
)


def column_fsp(tm: TableMapEvent, i: int) -> int | None:
    """Fractional-second digits of temporal column ``i`` (None for other types)."""
    if tm.column_types[i] in _FSP_TYPES:
        m = tm.column_metas[i]
        return m if isinstance(m, int) else 0
    return None


def column_label(tm: TableMapEvent, i: int) -> tuple[str, int | None, bool]:
    """(``TYPE meta=M``, fsp, nullable) for column ``i``, as the text dump shows it."""
    m = tm.column_metas[i]
    label = f"{column_type_name(tm.column_types[i])} meta={m}"
    return label, column_fsp(tm, i), bool(tm.nullable[i]) if i < len(tm.nullable) else True


def _names(tm: TableMapEvent | None, cols: tuple[int, ...]) -> list[str]:
    names = tm.column_names if tm is not None else None
    return [names[i] if names and i < len(names) and names[i] else f"@{i + 1}" for i in cols]


def _fsp(tm: TableMapEvent | None, i: int):
    return column_fsp(tm, i) if tm is not None else None


def image_json(tm: TableMapEvent | None, cols: tuple[int, ...], values) -> dict | None:
    if values is None:
        return None
    return {n: json_value(v, _fsp(tm, i)) for n, i, v in zip(_names(tm, cols), cols, values)}


def _field_json(v):
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _field_json(getattr(v, f.name)) for f in dataclasses.fields(v) if f.name not in _SKIP_FIELDS}
    if isinstance(v, (list, tuple)):
        return [_field_json(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _field_json(x) for k, x in v.items()}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"hex": bytes(v).hex()}
    if type(v) is InvalidText:
        return json_value(v)
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return json_value(v) if not isinstance(v, type) else str(v)


def event_json(ev) -> dict:
    h = ev.header
    out = {
        "file": h.file,
        "pos": h.pos,
        "end_pos": h.end_pos,
        "type_code": h.type_code,
        "type": event_type_name(h.type_code),
        "timestamp": h.timestamp,
        "server_id": h.server_id,
    }
    if h.in_payload:
        out["in_payload"] = True
        out["inner_pos"] = h.inner_pos
    if type(ev) is RowsEvent:
        tm = ev.table_map
        out["db"] = tm.schema if tm else None
        out["table"] = tm.table if tm else None
        out["op"] = ev.op
        out["table_id"] = ev.table_id
        out["rows"] = [
            {"before": image_json(tm, ev.columns_before, b), "after": image_json(tm, ev.columns_after, a)}
            for b, a in ev.rows
        ]
        return out
    for f in dataclasses.fields(ev):
        if f.name not in _SKIP_FIELDS:
            value = getattr(ev, f.name)
            if type(value) is InvalidText:  # valid JSON text, and beside it the exact bytes
                out.setdefault(f.name, str(value))
                out[f"{f.name}_hex"] = value.raw.hex()
            else:
                out.setdefault(f.name, _field_json(value))
    if type(ev) is UnknownEvent:
        out["raw_len"] = len(ev.raw)
    for prop in ("gtid",):
        v = getattr(ev, prop, None)
        if isinstance(v, str):
            out[prop] = v
    return out


# -- text ---------------------------------------------------------------------

def _stamp(ts: int) -> str:
    t = _dt.datetime.fromtimestamp(ts, _dt.timezone.utc)
    return t.strftime("%y%m%d %H:%M:%S").replace(" 0", "  ", 1) if t.hour < 10 else t.strftime("%y%m%d %H:%M:%S")


# printable ASCII stays, every other byte (and the quote and backslash) is spelled \xNN
_BYTE_ESCAPES = {b: f"\\x{b:02x}" for b in range(256) if not (32 <= b < 127 and b not in (39, 92))}


def _text_value(v, fsp) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, (bytes, bytearray)):
        return "'" + bytes(v).decode("latin-1").translate(_BYTE_ESCAPES) + "'"
    if type(v) is InvalidText:  # as mysqlbinlog shows such text: its bytes
        return _text_value(v.raw, fsp)
    j = json_value(v, fsp)
    if isinstance(j, dict):  # a partial JSON update: its diffs
        return json.dumps(j, ensure_ascii=False)
    if isinstance(j, str):
        return "'" + j.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(j)


def _text_image(lines: list[str], tm, cols, values) -> None:
    for i, v in zip(cols, values):
        label, fsp, nullable = column_label(tm, i) if tm is not None else ("?", None, True)
        lines.append(
            f"###   @{i + 1}={_text_value(v, fsp)} /* {label} nullable={int(bool(nullable))} is_null={int(v is None)} */"
        )


def event_text(ev) -> str:
    h = ev.header
    name = event_type_name(h.type_code)
    head = f"# at {h.pos}" + (f" (in payload, +{h.inner_pos})" if h.in_payload else "")
    lines = [head, f"#{_stamp(h.timestamp)} server id {h.server_id}  end_log_pos {h.end_pos}  {name}"]
    if type(ev) is RowsEvent:
        tm = ev.table_map
        target = f"`{tm.schema}`.`{tm.table}`" if tm else f"table_id {ev.table_id}"
        for b, a in ev.rows:
            if ev.op == OP_INSERT:
                lines += [f"### INSERT INTO {target}", "### SET"]
                _text_image(lines, tm, ev.columns_after, a)
            elif ev.op == OP_DELETE:
                lines += [f"### DELETE FROM {target}", "### WHERE"]
                _text_image(lines, tm, ev.columns_before, b)
            elif ev.op == OP_UPDATE:
                lines += [f"### UPDATE {target}", "### WHERE"]
                _text_image(lines, tm, ev.columns_before, b)
                lines.append("### SET")
                _text_image(lines, tm, ev.columns_after, a)
    elif type(ev) is TableMapEvent:
        types = ", ".join(column_type_name(t) for t in ev.column_types)
        lines.append(f"#\tTable_map: `{ev.schema}`.`{ev.table}` mapped to number {ev.table_id} ({types})")
    elif hasattr(ev, "query") and isinstance(ev.query, str):
        schema = getattr(ev, "schema", None)
        if schema:
            lines.append(f"use `{schema}`/*!*/;")
        lines.append(f"{ev.query}\n/*!*/;")
    else:
        info = {k: v for k, v in event_json(ev).items() if k not in ("file", "pos", "end_pos", "type_code", "type", "timestamp", "server_id")}
        if info:
            lines.append("#\t" + json.dumps(info, default=str)[:2000])
    return "\n".join(lines)


def dump(events: Iterable, fmt: str, out: IO[str]) -> int:
    n = 0
    write = out.write
    if fmt == "jsonl":
        for ev in events:
            write(json.dumps(event_json(ev), ensure_ascii=False) + "\n")
            n += 1
    else:
        for ev in events:
            write(event_text(ev) + "\n")
            n += 1
    return n
