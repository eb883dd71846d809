"""MariaDB 5.3 fractional TIME/DATETIME/TIMESTAMP(n) (``mysql56_temporal_format=OFF``) through the
pipeline: their table maps carry no precision, so bronze takes it from the DDL (the schema history
plus the batch's own statements) and silver must equal the server.

Also checks the two sources of the DDL: the table created in the batch being decoded, and a table
created in an earlier run, whose later rows arrive in a new file.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mariadb_server import MariaDBServer, mariadb_available
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from pipelines import bronze, delta_io
from pipelines.silver import step as silver_step
from pipelines.binlog.events import TableMapEvent
from pipelines.binlog.stream import iter_events
from pipelines.config import load_config
from pipelines.paths import silver_table_path

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

CREATE = """
SET GLOBAL mysql56_temporal_format = OFF;  -- MariaDB 5.3 storage formats for new columns
CREATE TABLE old53 (id INT PRIMARY KEY, t3 TIME(3), t6 TIME(6), dt2 DATETIME(2), dt6 DATETIME(6),
                    ts4 TIMESTAMP(4) NULL DEFAULT NULL, t0 TIME, dt0 DATETIME);
SET GLOBAL mysql56_temporal_format = ON;
"""
FIRST = """
INSERT INTO old53 VALUES (1, '-12:34:56.789', '838:59:59.999999', '2024-02-29 23:59:59.99',
                          '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.9999', '-838:59:59', '1000-01-01 00:00:00'),
                         (2, '01:02:03.456', '-00:00:00.000001', '2001-02-03 04:05:06.07', '2001-02-03 04:05:06.070809',
                          '2001-02-03 04:05:06.0708', '00:00:00', '2001-02-03 04:05:06'),
                         (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
UPDATE old53 SET t3 = '00:00:00.001', dt6 = '1970-01-01 00:00:00.000001' WHERE id = 2;
"""
LATER = """
INSERT INTO old53 VALUES (4, '23:59:59.999', '-00:00:01.5', '1999-12-31 23:59:59.5', '2000-01-01 00:00:00.123456',
                          '2000-01-01 00:00:00.0001', '12:00:00', '2000-01-01 00:00:00');
DELETE FROM old53 WHERE id = 3;
"""
SELECT = ("SELECT id, CAST(t3 AS CHAR), CAST(t6 AS CHAR), CAST(dt2 AS CHAR), CAST(dt6 AS CHAR), "
          "CAST(ts4 AS CHAR), CAST(t0 AS CHAR), CAST(dt0 AS CHAR) FROM old53 ORDER BY id")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    srv = MariaDBServer(tmp_path_factory.mktemp("oldtime-mariadb"), row_image="FULL", row_metadata="MINIMAL")
    srv.start()
    srv.sql("SET GLOBAL time_zone = '+00:00'")
    srv.sql("CREATE DATABASE shop")
    yield srv
    srv.stop()


def _copy_closed(srv: MariaDBServer, dest: Path) -> None:
    srv.flush_logs()
    dest.mkdir(parents=True, exist_ok=True)
    for f in srv.binlog_files()[:-1]:
        if not (dest / f.name).exists():
            shutil.copyfile(f, dest / f.name)


def _silver_rows(spark, warehouse: Path) -> list[list]:
    df = delta_io.open_table(silver_table_path(str(warehouse), "shop", "old53"), spark=spark).read_df()
    rows = []
    for r in df.orderBy("id").collect():
        cells = [str(r["id"])]
        for c in ("t3", "t6", "dt2", "dt6", "ts4", "t0", "dt0"):
            v = r[c]
            cells.append(None if v is None else v if isinstance(v, str) else v.strftime("%Y-%m-%d %H:%M:%S.%f"))
        rows.append(cells)
    return rows


def _server_rows(srv: MariaDBServer) -> list[list]:
    """The server's rows, with datetimes spelled as the silver check spells them (6 digits)."""
    out = []
    for row in srv.query_rows(SELECT, db="shop"):
        cells = [row[0]]
        for i, v in enumerate(row[1:]):
            if v is not None and i in (2, 3, 4, 6):  # DATETIME / TIMESTAMP -> microseconds
                date, _, frac = v.partition(".")
                v = f"{date}.{(frac + '000000')[:6]}"
            cells.append(v)
        out.append(cells)
    return out


def test_mariadb53_temporal_columns_land_exactly(spark, server, tmp_path):
    binlogs, warehouse = tmp_path / "binlogs", tmp_path / "wh"
    server.sql(CREATE + FIRST, db="shop")
    _copy_closed(server, binlogs)
    # the decoder alone cannot size these columns: the table map says TIME/DATETIME/TIMESTAMP, no precision
    files = sorted(binlogs.iterdir())
    maps = [ev for f in files for ev in iter_events(str(f), decode_rows=False)
            if type(ev) is TableMapEvent and ev.table == "old53"]
    assert maps and all(m.column_metas[1] in (0, None) for m in maps), "not the 5.3 formats: test is void"

    cfg = load_config(REPO / "conf" / "pipeline.yaml",
                      {"input": str(binlogs), "warehouse": str(warehouse), "progress": False})
    bronze.run(spark, cfg)
    silver_step.run(spark, cfg)
    assert _silver_rows(spark, warehouse) == _server_rows(server)

    # later rows in a new file: the CREATE is now only in the schema history of earlier batches
    server.sql(LATER, db="shop")
    _copy_closed(server, binlogs)
    stats = bronze.run(spark, cfg)
    assert stats.quarantined == 0
    silver_step.run(spark, cfg)
    assert _silver_rows(spark, warehouse) == _server_rows(server)
