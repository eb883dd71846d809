"""INET6 text as the server prints it, with the server as the oracle: MariaDB writes the leftmost
longest run of zero groups as ``::`` even when the run is one group long (RFC 5952, which Python's
``ipaddress`` follows, keeps a lone ``0``). Checked as the function gives it
(:func:`pipelines.schema.resolve.inet6_text`) and as silver's typing gives it inside Spark's tasks
(an INET6 cell logged as bytes, completed by its value fix). Found by the soak (seed 27,
full/minimal): ``::485b:...`` landed in silver as ``0:485b:...``."""
from __future__ import annotations

import pytest
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from pipelines.schema.resolve import inet6_text
from pipelines.schema.resolve import FIX_INET6
from pipelines.schema.typemap import ColumnSpec
from pipelines.silver.spark_typing import typed_columns

pytestmark = pytest.mark.mariadb

ADDRESSES = [
    "0:1:2:3:4:5:6:7", "1:0:2:3:4:5:6:7", "1:2:3:4:5:6:7:0", "1:2:3:0:5:6:7:8", "0:1:0:1:0:1:0:1",
    "1:0:1:0:1:0:1:0", "1:0:0:2:3:4:5:6", "1:0:2:0:0:3:4:5", "1:0:0:2:0:0:3:4", "0:0:1:2:3:4:0:0",
    "0:0:0:0:0:0:0:0", "0:0:0:0:0:0:0:1", "1:0:0:0:0:0:0:0", "0:1:0:0:0:0:0:0", "0:0:0:0:1:0:0:0",
    "0:0:0:0:0:ffff:102:304", "0:0:0:0:0:0:102:304", "0:0:0:0:0:0:1:2", "0:0:0:0:0:1:2:3", "ffff:0:0:0:0:0:0:0",
    "0:485b:32fb:1fb:32ff:1d90:be06:3071", "2001:db8:0:0:0:ff00:42:8329", "fe80:0:0:0:0:0:0:1",
]


@pytest.fixture(scope="module")
def server_texts(tmp_path_factory):
    """``[(hex, text)]`` of every address, as the server stores and prints it."""
    from mariadb_server import MariaDBServer, mariadb_available

    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    srv = MariaDBServer(tmp_path_factory.mktemp("inet6")).start()
    try:
        srv.sql("CREATE DATABASE p; CREATE TABLE p.t (i INT, a INET6)")
        srv.sql("INSERT INTO p.t VALUES " + ", ".join(f"({i}, '{a}')" for i, a in enumerate(ADDRESSES)))
        return [(h, a) for _, a, h in srv.query_rows("SELECT i, a, HEX(a) FROM p.t ORDER BY i")]
    finally:
        srv.stop()


def test_the_drivers_text_is_the_servers(server_texts):
    assert [inet6_text(bytes.fromhex(h)) for h, _ in server_texts] == [a for _, a in server_texts]
    assert "::1:2:3:4:5:6:7" in [a for _, a in server_texts]  # the server does shorten one zero group


@pytest.mark.spark
def test_the_text_typed_in_sparks_tasks_is_the_servers(spark, server_texts):  # noqa: F811
    image = "ARRAY<STRUCT<idx INT, name STRING, type STRING, text STRING, bin BINARY>>"
    bronze = spark.createDataFrame([(i, [(0, None, "INET6", None, bytes.fromhex(h))]) for i, (h, _) in enumerate(server_texts)],
                                   f"i INT, after {image}")
    rows = typed_columns(bronze, [ColumnSpec("a", "inet6")], fixes={0: (FIX_INET6,)}).orderBy("i").collect()
    assert [r.after.a for r in rows] == [a for _, a in server_texts]
