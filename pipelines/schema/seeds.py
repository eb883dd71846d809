"""Seed schemas: ``SHOW CREATE TABLE`` text for tables older than the first binlog, read from a seed
folder."""
from __future__ import annotations

import re
from pathlib import Path


from pipelines.paths import unescape_name
from pipelines.schema.ddl import DdlError
from pipelines.schema.history import SchemaHistory
from pipelines.schema.model import SchemaVersion


def read_seed_folder(seed_dir) -> list[tuple[str, str, str, str]]:
    """``(db, table, create_sql, path)`` for every ``*.sql`` file of a seed folder:
    ``<seed>/<db>/<table>.sql`` or ``<seed>/<db>.<table>.sql`` (names escaped as in
    :mod:`pipelines.paths`; the first ``.`` of a flat name separates db and table).
    The text may be bare ``SHOW CREATE TABLE`` output or the client's tabular form.
    Every layout problem is reported in one :class:`DdlError`.
    """
    entries, problems = _scan_seed_folder(seed_dir)
    if problems:
        raise DdlError(f"schema_seed {seed_dir}: {len(problems)} bad file(s):\n" + "\n".join(f"  - {p}" for p in problems))
    return entries


def _scan_seed_folder(seed_dir) -> tuple[list[tuple[str, str, str, str]], list[str]]:
    root = Path(seed_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"schema_seed folder {str(root)!r} does not exist or is not a folder")
    entries, problems = [], []
    for p in sorted(root.rglob("*.sql")):
        rel = p.relative_to(root)
        stem = p.name[: -len(".sql")]
        if len(rel.parts) == 2:
            db, table = unescape_name(rel.parts[0]), unescape_name(stem)
        elif len(rel.parts) == 1 and "." in stem:
            d, t = stem.split(".", 1)
            db, table = unescape_name(d), unescape_name(t)
        else:
            problems.append(f"{p}: expected <seed>/<db>/<table>.sql or <seed>/<db>.<table>.sql")
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            problems.append(f"{p}: cannot read: {e}")
            continue
        if text.startswith("Table\tCreate Table"):  # `mariadb -B -e "SHOW CREATE TABLE t"` output
            row = text.split("\n", 1)[1] if "\n" in text else ""
            text = row.split("\t", 1)[1] if "\t" in row else row
            text = re.sub(r"\\([nt\\0])", lambda m: {"n": "\n", "t": "\t", "\\": "\\", "0": "\0"}[m.group(1)], text)
        m = re.search(r"\bCREATE\s", text, re.IGNORECASE)
        if not m:
            problems.append(f"{p}: no CREATE TABLE statement in the file")
            continue
        body = text[m.start():].strip()
        if body.endswith(";"):
            body = body[:-1]
        entries.append((db, table, body, str(p)))
    return entries, problems


def load_seeds(history: SchemaHistory, seed_dir) -> list[SchemaVersion]:
    """Add a seed version for every seed file whose table has no history yet; every
    bad file is reported in one :class:`DdlError`."""
    entries, problems = _scan_seed_folder(seed_dir)
    added = []
    for db, table, text, path in entries:
        if history.versions(db, table):
            continue
        try:
            added.append(history.add_seed(db, table, text, path))
        except DdlError as e:
            problems.append(str(e))
    if problems:
        raise DdlError(f"schema_seed {seed_dir}: {len(problems)} bad file(s):\n" + "\n".join(f"  - {p}" for p in problems))
    return added

