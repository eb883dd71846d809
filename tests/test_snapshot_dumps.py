"""Dumps written by the private MariaDB's ``mariadb-dump`` read back by :mod:`pipelines.snapshot`:
every row's cells equal the binlog decoder's cells of the same row (the oracle, see
``snapshot_oracle.py``), for each option set the issue lists; a dump read in byte ranges gives the
rows of the whole; a cut dump is refused with its file and offset; the position headers are read.
"""
from __future__ import annotations

import gzip
import shutil
import subprocess
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import snapshot_oracle as oracle
from mariadb_server import MariaDBServer, mariadb_available

from pipelines.snapshot.cells import RowReader
from pipelines.snapshot.errors import DumpError, NoPosition, TruncatedDump
from pipelines.snapshot.reader import DumpReading, reading_at
from pipelines.snapshot.source import DumpFile, read_position
from pipelines.snapshot.session import DumpState
from pipelines.snapshot.split import delimiter_blocks, delimiter_lines, next_statement_start, outline
from pipelines.snapshot.statements import iter_statements
from pipelines.snapshot.tab import iter_tab_rows, next_row_start, read_tab_folder

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A FULL-metadata server holding the oracle's tables, and the decoder's cells of their rows."""
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    srv = MariaDBServer(tmp_path_factory.mktemp("snapshot-mdb"), row_metadata="FULL")
    srv.start()
    try:
        oracle.create_tables(srv)
        oracle.fill(srv)
        srv.flush_logs()
        expected = oracle.binlog_cells(srv)
        assert sum(sum(c.values()) for c in expected.values()) == 53
        yield srv, expected
    finally:
        srv.stop()


def _ours(cells: dict) -> dict:
    return {k: v for k, v in cells.items() if k[0] in (oracle.DB, oracle.DB2)}


@pytest.mark.parametrize("options", [
    ("--master-data=2",),
    ("--master-data=1", "--skip-extended-insert"),
    ("--master-data=2", "--complete-insert"),
    ("--master-data=2", "--hex-blob"),
    ("--master-data=2", "--hex-blob", "--skip-extended-insert", "--complete-insert"),
    ("--all-databases", "--master-data=2"),
    ("--gtid", "--master-data=1", "--insert-ignore"),
    ("--replace", "--skip-tz-utc"),
], ids=lambda o: " ".join(o))
def test_every_dumped_row_is_the_binlogs_row(source, tmp_path, options):
    srv, expected = source
    if "--skip-tz-utc" in options:
        # without SET TIME_ZONE the dump's TIMESTAMP text is in the server's zone (UTC here); a
        # reader that does not know it refuses, one told the zone reads it
        path = oracle.dump(srv, tmp_path / "dump.sql", *options)
        with pytest.raises(DumpError, match="sets no time zone"):
            oracle.read_cells(path.read_bytes(), path.name)
        state = DumpState.from_header(path.read_bytes()[:4096])
        state.session["time_zone"] = "+00:00"
        got = oracle.read_cells(path.read_bytes(), path.name, reading=DumpReading(state, name=path.name))
    else:
        path = oracle.dump(srv, tmp_path / "dump.sql", *options)
        got = oracle.read_cells(path.read_bytes(), path.name)
    assert not oracle.differences(expected, _ours(got)), "\n".join(oracle.differences(expected, _ours(got)))


def test_compact_dump_needs_what_it_does_not_say(source, tmp_path):
    # --compact drops SET NAMES, the header and its server version: the reader refuses to guess the
    # charset of the strings and the server (MariaDB and MySQL log YEAR and JSON differently)
    srv, expected = source
    path = oracle.dump(srv, tmp_path / "compact.sql", "--compact")
    buf = path.read_bytes()
    with pytest.raises(DumpError, match="no SET NAMES|does not say which server"):
        oracle.read_cells(buf, path.name)
    state = DumpState(flavor="mariadb", session={"character_set_client": "utf8mb4", "time_zone": "+00:00"})
    got = oracle.read_cells(buf, path.name, reading=DumpReading(state, name=path.name))
    assert not oracle.differences(expected, got)


def test_one_database_without_use(source, tmp_path):
    srv, expected = source
    path = oracle.dump(srv, tmp_path / "one.sql", "--master-data=2", "--one-db")
    assert b"\nUSE `snap`;" not in path.read_bytes()  # (the procedure body has a USE line of its own)
    got = oracle.read_cells(path.read_bytes(), path.name)
    want = {k: v for k, v in expected.items() if k[0] == oracle.DB}
    assert not oracle.differences(want, got)


def test_gzip_and_zstd_read_as_one_stream(source, tmp_path):
    srv, expected = source
    plain = oracle.dump(srv, tmp_path / "d.sql", "--master-data=2", "--hex-blob")
    subprocess.run(["gzip", "-k", str(plain)], check=True)
    subprocess.run(["zstd", "-q", str(plain), "-o", str(plain) + ".zst"], check=True)
    shutil.copy(str(plain) + ".gz", tmp_path / "no-suffix")  # the magic decides, not the name
    for path, kind in ((tmp_path / "d.sql.gz", "gzip"), (tmp_path / "d.sql.zst", "zstd"), (tmp_path / "no-suffix", "gzip")):
        dump = DumpFile(path)
        assert dump.compression == kind and not dump.seekable
        got = oracle.read_file_cells(path)
        assert not oracle.differences(expected, got), path
        pos, plain_pos = read_position(dump, whole=True), read_position(DumpFile(plain))
        assert (pos.file, pos.pos, pos.gtid) == (plain_pos.file, plain_pos.pos, plain_pos.gtid)
        assert pos.gtid == srv.gtid_binlog_pos()  # MariaDB writes it after the data: read to the end
    copy = DumpFile(tmp_path / "d.sql.zst").decompress_to(tmp_path / "copy.sql")
    assert copy.seekable and (tmp_path / "copy.sql").read_bytes() == plain.read_bytes()


def test_tab_folder(source, tmp_path):
    srv, expected = source
    folder = srv.files_dir / "tab"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    header = oracle.dump(srv, tmp_path / "header.sql", "--master-data=2", f"--tab={folder}", "--one-db")
    tables = read_tab_folder(str(folder))
    assert {t.table for t in tables} == {"every_type", "generated", "keyless"}
    got: dict = {}
    for t in tables:
        assert t.db == oracle.DB and t.txt_charset == "binary" and t.state.time_zone == "+00:00"
        reader = RowReader(t.db, t.table, t.schema, client_charset=t.txt_charset, time_zone=t.state.time_zone,
                           flavor=t.state.flavor)
        buf = open(t.txt_path, "rb").read()
        for _, row in iter_tab_rows(t, buf):
            got.setdefault((t.db, t.table), Counter())[tuple(reader.cells(row))] += 1
        # rows can be read by byte range: each part from next_row_start gives the rows of the whole
        assert t.splittable == (t.table != "every_type")  # BIT values are written unescaped
        if not t.splittable:
            continue
        whole = [r for _, r in iter_tab_rows(t, buf)]
        starts = (next_row_start(buf, o) for o in range(0, len(buf), max(1, len(buf) // 7)))
        cuts = sorted({0, len(buf)} | {s for s in starts if s is not None})
        parts = [r for a, b in zip(cuts, cuts[1:]) for _, r in iter_tab_rows(t, buf, a, b)]
        assert parts == whole
    want = {k: v for k, v in expected.items() if k[0] == oracle.DB}
    assert not oracle.differences(want, got), "\n".join(oracle.differences(want, got))
    assert read_position(DumpFile(header)).file.startswith("binlog.")  # the position went to stdout


def _split_rows(buf: bytes, offsets, name: str) -> Counter:
    """The rows of ``buf`` read as a loader reads it: the outline of each range (after the
    DELIMITER blocks of the whole), then each range's rows from the state the outline gives."""
    blocks = delimiter_blocks(delimiter_lines(buf))
    starts = sorted({0} | {s for s in (next_statement_start(buf, o, blocks) for o in offsets) if s is not None})
    ranges = list(zip(starts, starts[1:] + [len(buf)]))
    landmarks = []
    for a, b in ranges:
        landmarks += outline(buf, a, b, blocks=blocks, name=name)[0]
    initial = DumpState.from_header(buf[:4096])
    rows = Counter()
    for a, b in ranges:
        reading = reading_at(landmarks, a, initial, name=name)
        for row in reading.rows(iter_statements(buf, a, b, reading.state, name=name)):
            rows[(row.db, row.table, tuple(row.cells))] += 1
    return rows


@pytest.fixture(scope="module")
def dumps(source, tmp_path_factory):
    srv, _ = source
    base = tmp_path_factory.mktemp("split")
    out = {}
    for key, options in (("extended", ("--master-data=2",)), ("single", ("--master-data=2", "--skip-extended-insert",
                                                                          "--hex-blob"))):
        path = oracle.dump(srv, base / f"{key}.sql", *options)
        buf = path.read_bytes()
        whole = Counter()
        reading = DumpReading(DumpState.from_header(buf[:4096]), name=path.name)
        for row in reading.rows(iter_statements(buf, 0, None, reading.state, name=path.name)):
            whole[(row.db, row.table, tuple(row.cells))] += 1
        out[key] = (buf, whole, reading.skipped)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["extended", "single"]), fractions=st.lists(st.floats(0, 1), min_size=1, max_size=12))
def test_split_anywhere_gives_the_rows_of_the_whole(dumps, kind, fractions):
    buf, whole, _ = dumps[kind]
    offsets = [int(f * (len(buf) - 1)) for f in fractions]
    assert _split_rows(buf, offsets, f"{kind}.sql") == whole


def test_split_at_every_line_start_of_the_routines(dumps):
    # every line of the trigger and procedure bodies (lines that look like INSERT, USE, DELIMITER)
    buf, whole, skipped = dumps["extended"]
    first = buf.index(b"DELIMITER ;;")
    last = buf.rindex(b"DELIMITER ;\n")
    offsets = [i + 1 for i in range(first, last) if buf[i] == 10]
    for k in range(0, len(offsets), 7):
        assert _split_rows(buf, offsets[k:k + 7], "extended.sql") == whole
    assert skipped["CREATE DEFINER"] + skipped["CREATE"] >= 2  # the trigger and the procedure, counted


def test_statement_boundaries_are_statements(dumps):
    buf, _, _ = dumps["extended"]
    blocks = delimiter_blocks(delimiter_lines(buf))
    truth = {st.offset for st in iter_statements(buf, 0, None, DumpState())}
    for o in range(0, len(buf), 997):
        s = next_statement_start(buf, o, blocks)
        if s is None:
            continue
        st = next(iter_statements(buf, s, None, DumpState(delimiter=b";")), None)
        assert st is None or st.offset in truth, (o, s, buf[s:s + 80])


@pytest.mark.parametrize("where", ["in a string", "in a row", "in the VALUES head", "in CREATE TABLE", "in a hex blob"])
def test_a_cut_dump_names_its_file_and_offset(dumps, tmp_path, where):
    buf, _, _ = dumps["extended" if where != "in a hex blob" else "single"]
    at = {
        "in a string": lambda: buf.index(b"DELIMITER ;;\\nCREATE") + 5,
        "in a row": lambda: buf.index(b"\n(2,") + 3,
        "in the VALUES head": lambda: buf.index(b"INSERT INTO `every_type` VALUES") + 15,
        "in CREATE TABLE": lambda: buf.index(b"CREATE TABLE `generated`") + 40,
        "in a hex blob": lambda: buf.index(b",0x", buf.index(b"INSERT INTO `every_type`")) + 100,
    }[where]()
    path = tmp_path / "cut.sql"
    path.write_bytes(buf[:at])
    with pytest.raises(TruncatedDump) as e:
        oracle.read_cells(path.read_bytes(), path.name)
    assert e.value.file == "cut.sql" and e.value.offset is not None and e.value.offset <= at
    assert str(e.value).startswith(f"cut.sql: offset {e.value.offset}: ")
    # the same cut through gzip, read as a stream: the offset is in the decompressed bytes
    gz = tmp_path / "cut.sql.gz"
    gz.write_bytes(gzip.compress(buf[:at]))
    with pytest.raises(TruncatedDump) as g:
        oracle.read_file_cells(gz)
    assert g.value.file == "cut.sql.gz" and g.value.offset == e.value.offset


def test_a_cut_compressed_stream(dumps, tmp_path):
    buf, _, _ = dumps["extended"]
    packed = gzip.compress(buf)
    path = tmp_path / "d.sql.gz"
    path.write_bytes(packed[: len(packed) // 2])  # an interrupted mysqldump | gzip
    with pytest.raises(TruncatedDump) as e:
        oracle.read_file_cells(path)
    assert e.value.file == "d.sql.gz" and 0 < e.value.offset < len(buf)


def test_positions_of_real_dumps(source, tmp_path):
    srv, _ = source
    file, pos = srv.master_status()
    gtid = srv.gtid_binlog_pos()
    for options, form, commented in ((("--master-data=1",), "master-data", False),
                                     (("--master-data=2",), "master-data", True),
                                     (("--master-data=1", "--gtid"), "master-data", True)):
        path = oracle.dump(srv, tmp_path / "p.sql", *options, "--no-data")
        p = read_position(DumpFile(path))
        assert (p.file, p.pos, p.form, p.commented, p.of_source) == (file, pos, form, commented, False), options
        assert (p.gtid, p.gtid_flavor) == (gtid, "mariadb")
    # a replica's dump records its source's coordinates: made here with a source that is never started
    srv.sql("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=1, MASTER_USER='x', "
            "MASTER_LOG_FILE='source-bin.000042', MASTER_LOG_POS=4711")
    try:
        for level, commented in (("1", False), ("2", True)):
            path = oracle.dump(srv, tmp_path / "s.sql", f"--dump-slave={level}", "--no-data")
            p = read_position(DumpFile(path))
            assert (p.file, p.pos, p.form, p.commented, p.of_source) == ("source-bin.000042", 4711, "dump-slave",
                                                                          commented, True)
        both = oracle.dump(srv, tmp_path / "b.sql", "--dump-slave=2", "--master-data=2", "--no-data")
        p = read_position(DumpFile(both))
        assert (p.file, p.pos, p.of_source) == (file, pos, False)  # the server's own coordinates win
    finally:
        srv.sql("RESET SLAVE ALL")
    path = oracle.dump(srv, tmp_path / "none.sql", "--no-data")
    with pytest.raises(NoPosition) as e:
        read_position(DumpFile(path))
    assert "--position FILE:POS" in str(e.value) and "--gtid SET" in str(e.value) and "none.sql" in str(e.value)


def test_cells_are_the_full_metadata_form(mariadb_factory, tmp_path):
    # With binlog_row_metadata=MINIMAL the decoder's cells lack names, and ENUM/SET are numbers (and
    # their type text has no charset): silver completes them from the DDL (apply_fix). The dump's
    # cells take the FULL form, the one silver reads as it is; the two meet after silver's fixes.
    from pipelines.schema.resolve import FIX_ENUM, FIX_SET, apply_fix

    srv = mariadb_factory(row_metadata="MINIMAL")
    oracle.create_tables(srv)
    oracle.fill(srv)
    srv.flush_logs()
    minimal = oracle.binlog_cells(srv)
    path = oracle.dump(srv, tmp_path / "d.sql", "--master-data=2")
    dumped = oracle.read_cells(path.read_bytes(), path.name)
    members = dict(oracle.COLUMNS)

    def key(table, cells):  # the id, or for the keyless table the whole row (it has no ENUM or SET)
        return cells[0][3] if table[1] != "keyless" else tuple((c[3], c[4]) for c in cells)

    fixed_kinds = Counter()
    for table in minimal:
        by_key = {key(table, cells): cells for cells in dumped[table]}
        for cells in minimal[table]:
            ours = by_key[key(table, cells)]
            for mine, theirs in zip(cells, ours):
                idx, name, typ, text, raw = mine
                assert name is None and theirs[1] is not None and idx == theirs[0]
                if typ in ("ENUM", "SET"):
                    values = tuple(v.strip("'") for v in members[theirs[1]].split("(", 1)[1].split(")")[0].split(","))
                    text, raw = apply_fix((FIX_ENUM if typ == "ENUM" else FIX_SET, values), text, raw)
                    fixed_kinds[typ] += 1
                    assert theirs[2].startswith(typ + " ")  # FULL logs their charset
                else:
                    assert typ == theirs[2]
                assert (text, raw) == (theirs[3], theirs[4]), (table, theirs[1])
    assert fixed_kinds["ENUM"] and fixed_kinds["SET"]


def test_float_is_what_the_server_prints(source, tmp_path):
    # The one value a dump does not hold exactly: MariaDB prints FLOAT with 6 significant digits
    # (FLT_DIG), so a single-precision value needing more reads back rounded. Known and kept: the
    # snapshot's cell is the float the dump says (1234570), the binlog's the one stored (1234567).
    # DOUBLE is printed with all its digits.
    srv, _ = source
    srv.sql("CREATE DATABASE floats; CREATE TABLE floats.f (id INT PRIMARY KEY, f FLOAT, d DOUBLE);"
            "INSERT INTO floats.f VALUES (1, 1234567, 1234567.891), (2, 0.1, 0.1), (3, 16777217, 1e-300)")
    srv.flush_logs()

    def values(cells_by_table):
        return {cells[0][3]: (cells[1][3], cells[2][3]) for cells in cells_by_table[("floats", "f")]}

    binlog = values(oracle.binlog_cells(srv, ("floats",)))
    got = values(oracle.read_cells(oracle.dump(srv, tmp_path / "f.sql", "--master-data=2",
                                               databases=("floats",)).read_bytes()))
    assert binlog["2"] == got["2"] == ("0.10000000149011612", "0.1")
    assert binlog["1"] == ("1234567.0", "1234567.891") and got["1"] == ("1234570.0", "1234567.891")
    assert binlog["3"] == ("16777216.0", "1e-300") and got["3"] == ("16777200.0", "1e-300")


def _load_work(path, table_uri: str | None, schema, **kw):
    """One task's work over the whole of a plain dump, as the load job plans it."""
    import datetime as dt

    from pipelines.config import TableFilter
    from pipelines.snapshot_load.tasks import LoadWork

    buf = path.read_bytes()
    landmarks, _ = outline(buf, 0, None, blocks=delimiter_blocks(delimiter_lines(buf)), name=path.name)
    return LoadWork(path=str(path), name=path.name, start=0, stop=len(buf), landmarks=tuple(landmarks),
                    initial=DumpState.from_header(buf[:4096]), file_seq=4, event_pos=1234, seq_start="0000000400",
                    tables=TableFilter(), run_id="run-1", ingested_at=dt.datetime(2026, 11, 27, tzinfo=dt.timezone.utc),
                    table_uri=table_uri, arrow_schema=schema, **kw)


@pytest.mark.parametrize("options", [("--master-data=2",), ("--master-data=2", "--hex-blob", "--complete-insert")],
                         ids=lambda o: " ".join(o))
def test_bronze_rows_built_column_wise_are_the_row_by_row_rows(source, tmp_path, options):
    # the delta-rs load stages Arrow batches of whole INSERTs (SnapshotRowsBuilder); delta-spark
    # gets snapshot_row's tuples: the same rows, value for value
    import dataclasses

    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines import delta_io
    from pipelines.bronze.schema import BRONZE_LAYOUT
    from pipelines.snapshot_load.tasks import load_range

    srv, _expected = source
    path = oracle.dump(srv, tmp_path / "dump.sql", *options)
    table = tmp_path / "bronze"
    schema = delta_io.prepare_staging(str(table), delta_io.struct_of(BRONZE_LAYOUT))
    w = _load_work(path, str(table), schema)
    files = [f for kind, rec in load_range(w) if kind == "files" for f in rec]
    got = pa.concat_tables([pq.read_table(table / f.path) for f in files]).to_pylist()
    rows = [rec for kind, rec in load_range(dataclasses.replace(w, table_uri=None)) if kind == "row"]
    want = pa.table([pa.array(c, type=f.type) for c, f in zip(zip(*rows), schema)], schema=schema).to_pylist()
    assert len(got) == len(want) == 53
    for i, (a, b) in enumerate(zip(got, want)):
        assert a == b, f"row {i}: " + ", ".join(f"{k}: {a[k]!r} != {b[k]!r}" for k in a if a[k] != b[k])
