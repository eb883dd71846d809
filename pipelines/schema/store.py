"""Persistence of the schema history in ``<warehouse>/_pipeline/schema_history``: its layout, versions
to rows and back, and the run's update (the only module here that does I/O)."""
from __future__ import annotations

import datetime as _dt
from typing import Iterable, Mapping, Sequence
from pipelines.schema.history import SchemaHistory
from pipelines.schema.model import ColumnDef, SchemaVersion, TableSchema, UniqueKey
from pipelines.schema.seeds import load_seeds








def versions_to_rows(versions: Sequence[SchemaVersion], first_version: Mapping[tuple[str, str], int],
                     run_id: str | None, now: _dt.datetime) -> list[tuple]:
    """Rows (in :data:`pipelines.state.SCHEMA_HISTORY_COLUMNS` order) for new versions; ``first_version`` gives
    the next ``version`` number of each table."""
    counters = dict(first_version)
    rows = []
    for v in versions:
        key = (v.db, v.table)
        n = counters.get(key, 0)
        counters[key] = n + 1
        s = v.schema
        cols = None if s is None else [
            (c.name, c.type, c.length, c.decimals, c.unsigned, c.nullable, c.charset, list(c.values), c.generated,
             c.invisible, c.default) for c in s.columns]
        rows.append((
            v.db, v.table, v.valid_from, n, v.kind, cols,
            None if s is None else list(s.primary_key),
            None if s is None else [(u.name, list(u.columns)) for u in s.unique_keys],
            None if s is None else s.charset,
            v.peer_db, v.peer_table, [list(p) for p in v.renamed], v.statement, v.reason, v.source_file, v.pos,
            run_id, now,
        ))
    return rows


def rows_to_versions(rows: Iterable) -> list[SchemaVersion]:
    """:class:`SchemaVersion` objects of persisted rows (Spark Rows or dicts), in history order."""
    out = []
    for r in sorted(rows, key=lambda r: (r["valid_from"], r["db"], r["table"], r["version"])):
        schema = None
        if r["columns"] is not None:
            cols = tuple(ColumnDef(c["name"], c["type"], c["length"], c["decimals"], bool(c["unsigned"]),
                                   bool(c["nullable"]), c["charset"], tuple(c["values"] or ()), c["generated"],
                                   bool(c["invisible"]), c["default"]) for c in r["columns"])
            schema = TableSchema(cols, tuple(r["primary_key"] or ()),
                                 tuple(UniqueKey(u["name"], tuple(u["columns"])) for u in r["unique_keys"] or ()),
                                 r["table_charset"])
        out.append(SchemaVersion(r["db"], r["table"], r["valid_from"], r["kind"], schema, r["statement"] or "",
                                 r["reason"], r["peer_db"], r["peer_table"], r["source_file"], r["pos"],
                                 tuple((p["old"], p["new"]) for p in r["renamed_columns"] or ())))
    return out


def update_history(spark, cfg, run_id: str | None = None) -> tuple[SchemaHistory, list[SchemaVersion]]:
    """Bring ``<warehouse>/_pipeline/schema_history`` up to date and return the whole history
    and the versions this call added.

    Continues from the persisted versions: seeds are added for tables without history, then
    every statement of ``<warehouse>/_pipeline/ddl`` after the last one applied, in ``_seq``
    order. A second call with the same input adds nothing.

    >>> history, added = update_history(spark, cfg)  # doctest: +SKIP
    >>> history.at("shop", "orders", row_seq).names  # doctest: +SKIP
    ['order_id', 'line', 'qty']
    """
    history, added, next_version = build_history(spark, cfg)
    if added:
        from pipelines import state

        now = _dt.datetime.now(_dt.timezone.utc)
        rows = versions_to_rows(added, next_version, run_id, now)
        state.append(spark, cfg, state.SCHEMA_HISTORY, rows)
    return history, added


def rebuild_history(spark, cfg, run_id: str | None = None) -> SchemaHistory:
    """Replace ``<warehouse>/_pipeline/schema_history`` with the history made again from nothing:
    the seeds, then every statement of ``<warehouse>/_pipeline/ddl`` in ``_seq`` order. For
    statements that land below the history's last one, which :func:`update_history` (it continues
    from the persisted versions) would never apply: a snapshot's ``CREATE TABLE`` at its position
    (:mod:`pipelines.snapshot_load`), and with it every later ``ALTER`` of its tables applied to
    it again. The same input makes the same rows, so a second call changes nothing that matters.

    >>> rebuild_history(spark, cfg).at("shop", "orders", row_seq).names  # doctest: +SKIP
    ['order_id', 'line', 'qty']
    """
    from pipelines import state

    history = SchemaHistory()
    added: list[SchemaVersion] = list(load_seeds(history, cfg.schema_seed)) if cfg.schema_seed else []
    stmts = sorted(state.read_rows(spark, cfg, state.DDL, ["_seq", "file", "pos", "db", "query"]),
                   key=lambda r: r["_seq"])
    for r in stmts:
        added += history.apply_statement(r["query"], r["db"], r["_seq"], source_file=r["file"], pos=r["pos"])
    now = _dt.datetime.now(_dt.timezone.utc)
    state.replace_rows(spark, cfg, state.SCHEMA_HISTORY, versions_to_rows(added, {}, run_id, now))
    return history


def build_history(spark, cfg, statements: Iterable[tuple[str, str | None, str]] = ()
                  ) -> tuple[SchemaHistory, list[SchemaVersion], dict[tuple[str, str], int]]:
    """The schema history as :func:`update_history` would make it, written nowhere:
    ``(history, versions added to the persisted ones, next version number per table)``.
    ``statements`` (``(query, default db, _seq)``, in ``_seq`` order) are applied after those of
    ``_pipeline/ddl``: bronze passes the DDL of the batch it has not committed yet."""
    from pipelines import state

    persisted = state.read_rows(spark, cfg, state.SCHEMA_HISTORY)
    history = SchemaHistory(rows_to_versions(persisted))
    next_version: dict[tuple[str, str], int] = {}
    for r in persisted:
        key = (r["db"], r["table"])
        next_version[key] = max(next_version.get(key, 0), r["version"] + 1)
    added: list[SchemaVersion] = []
    if cfg.schema_seed:
        added += load_seeds(history, cfg.schema_seed)
    stmts = sorted(state.read_rows(spark, cfg, state.DDL, ["_seq", "file", "pos", "db", "query"],
                                   above=("_seq", history.last_seq)), key=lambda r: r["_seq"])
    for r in stmts:
        added += history.apply_statement(r["query"], r["db"], r["_seq"], source_file=r["file"], pos=r["pos"])
    for query, db, seq in statements:
        if seq > history.last_seq:
            added += history.apply_statement(query, db, seq)
    return history, added, next_version

