"""What a bronze run did not do, as the text of its ``warning:`` lines (docs/errors.md). Pure
functions of what the run found; the step prints them (:meth:`BronzeStats.warn`) and counts them in
its row of ``_pipeline/runs`` (``warnings``).

>>> waiting_tail("binlog.000004", 1024, 1500)
'binlog.000004 ends in an unfinished event or transaction: bytes 1024 to 1500 wait for the rest (the next run reads on from byte 1024)'
"""
from __future__ import annotations

from collections.abc import Sequence

# what the source server must log for every change to reach silver
ROW_SETTINGS = "binlog_format=ROW (and binlog_row_image=FULL, binlog_row_metadata=FULL for column names)"


def no_binlogs(folder: str, others: Sequence[str]) -> str:
    """The input folder holds no ``<prefix>.<digits>`` file.

    >>> no_binlogs("/data/in", ["notes.txt"])
    '/data/in holds no binlog files (names like binlog.000001): nothing read; 1 other name(s) ignored: notes.txt'
    """
    what = ("it is empty" if not others else
            f"{len(others)} other name(s) ignored: {', '.join(others[:3])}" + (", ..." if len(others) > 3 else ""))
    return f"{folder} holds no binlog files (names like binlog.000001): nothing read; {what}"


def waiting_tail(name: str, end: int, size: int) -> str:
    """The newest file ends in the middle of an event or a transaction (the server is writing it,
    or the copy was cut): its tail waits for the next run."""
    return (f"{name} ends in an unfinished event or transaction: bytes {end} to {size} wait for the rest "
            f"(the next run reads on from byte {end})")


def server_change(before: str, before_server: tuple[str, int], name: str, server: tuple[str, int]) -> str | None:
    """Two consecutive files of one series written by different servers (a failover, a restore, an
    upgrade): legitimate, said once, not refused. None when the server is the same.

    >>> server_change("binlog.000002", ("5.5.24-log", 1), "binlog.000003", ("5.0.67-log", 2))
    'binlog.000003 was written by another server than binlog.000002 before it: server_id 2, version 5.0.67-log after server_id 1, version 5.5.24-log (a failover, a restore or an upgrade?): going on'
    """
    if before_server == server:
        return None
    (v0, id0), (v1, id1) = before_server, server
    return (f"{name} was written by another server than {before} before it: server_id {id1}, version {v1} after "
            f"server_id {id0}, version {v0} (a failover, a restore or an upgrade?): going on")


def statement_format(changes: int, files: Sequence[str]) -> str:
    """Changes the server logged as statements (``binlog_format=STATEMENT`` or ``MIXED``): their text
    is in ``_pipeline/ddl`` and a quarantine row each, and silver does not have them.

    >>> statement_format(2, ["mysql-bin.000001"])  # doctest: +ELLIPSIS
    '2 change(s) in mysql-bin.000001 were logged as statements, not rows: quarantined (StatementFormat), not in silver; set binlog_format=ROW ...'
    """
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more file(s)" if len(files) > 3 else "")
    return (f"{changes} change(s) in {shown} were logged as statements, not rows: quarantined (StatementFormat), "
            f"not in silver; set {ROW_SETTINGS} on the source server")


def quarantined_file(error: str) -> str:
    """A file that stopped at a bad event (its error names the file and the offset)."""
    return f"{error}: quarantined, the file stops there (see _pipeline/quarantine)"
