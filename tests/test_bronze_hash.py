"""The manifest's prefix checksum ignores the "file in use" flag that the server
clears when it closes a binlog (a closed file is not a changed file)."""
from pipelines.bronze import sha256_prefixes


def test_closing_a_binlog_is_not_a_content_change(mariadb_factory, tmp_path):
    srv = mariadb_factory()
    srv.sql("CREATE DATABASE h; CREATE TABLE h.t (id INT PRIMARY KEY); INSERT INTO h.t VALUES (1);")
    live = srv.binlog_files()[-1]
    open_copy = tmp_path / "open"
    open_copy.write_bytes(live.read_bytes())
    assert open_copy.read_bytes()[21] & 1  # the server is still writing it
    srv.flush_logs()  # closes it: the flag is cleared
    closed = live.read_bytes()
    assert not closed[21] & 1
    cut = len(open_copy.read_bytes())
    assert sha256_prefixes(str(open_copy), [cut]) == sha256_prefixes(str(live), [cut])
    damaged = tmp_path / "damaged"
    damaged.write_bytes(closed[:100] + bytes([closed[100] ^ 1]) + closed[101:])
    assert sha256_prefixes(str(damaged), [cut]) != sha256_prefixes(str(live), [cut])
