"""A decoded event stream over one binlog file: framing + event decoders +
the table-map bookkeeping that rows events need.

>>> with EventStream("samples/binlogs/binlog.000001") as s:
...     [(type(ev).__name__, ev.header.pos) for ev in s.events()][:2]
[('FormatDescriptionEvent', 4), ('GtidListEvent', 256)]
"""
from __future__ import annotations

from collections import Counter
from typing import Iterator

from .constants import EventFlag, EventType
from .events import DecodeContext, Event, UnknownEvent, decode_event
from .framing import BinlogFile

PAYLOAD = EventType.TRANSACTION_PAYLOAD


class EventStream:
    """Typed events of one file, in file order.

    ``events()`` yields events unpacked from a TRANSACTION_PAYLOAD right after
    the payload event itself (their headers say ``in_payload=True``) unless
    ``flatten=False``. Unknown event types come out as ``UnknownEvent`` and are
    counted in ``stats``; unknown events flagged ignorable are counted and
    skipped when ``skip_ignorable`` is true. ``table_map_hook`` may complete
    each table map from outside knowledge (see ``columns.override_metas``).
    """

    def __init__(
        self,
        source,
        *,
        name: str | None = None,
        decode_rows: bool = True,
        verify_checksums: bool = True,
        skip_ignorable: bool = True,
        table_map_hook=None,
        row_cells: bool = False,
    ):
        self.file = BinlogFile(source, name=name, verify_checksums=verify_checksums)
        self.ctx = DecodeContext(self.file.format, {}, decode_rows, table_map_hook, row_cells)
        self.skip_ignorable = skip_ignorable
        self.stats: Counter[str] = Counter()

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def format(self):
        return self.file.format

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.file.close()

    def events(self, start: int | None = None, end: int | None = None, *, flatten: bool = True) -> Iterator[Event]:
        """Decode every complete event starting in ``[start, end)``.

        A range that starts mid-file must start at a transaction boundary
        (see :mod:`.txindex`), since table maps do not cross transactions.
        """
        ctx = self.ctx
        stats = self.stats
        bf = self.file
        for raw in bf.events(start, end):
            ctx.format = bf.format
            ev = decode_event(raw, ctx)
            if type(ev) is UnknownEvent:
                if raw.header.flags & EventFlag.IGNORABLE:
                    stats["ignorable_skipped"] += 1
                    if self.skip_ignorable:
                        continue
                else:
                    stats["unknown"] += 1
            stats["events"] += 1
            yield ev
            if flatten and raw.header.type_code == PAYLOAD:
                for inner in ev.events:
                    stats["events_in_payload"] += 1
                    yield inner


def iter_events(source, start: int | None = None, end: int | None = None, **kw) -> Iterator[Event]:
    """Decoded events of one file (see :class:`EventStream`)."""
    with EventStream(source, **kw) as s:
        yield from s.events(start, end)
