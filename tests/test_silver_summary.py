"""The silver run's summary line (pipelines/silver/stats.py): its words, and its time as bronze's line gives it."""
import datetime as dt

from pipelines.silver.stats import SilverStats


def test_the_summary_line_ends_with_the_runs_time():
    start = dt.datetime(2026, 11, 27, 8, 0, 0, tzinfo=dt.timezone.utc)
    stats = SilverStats("r1", start, ended_at=start + dt.timedelta(seconds=2.25), status="ok", segments=4,
                        inserted=13, updated=1, deleted=2, schema_versions=5)
    stats.rows.update({"c": 14, "u": 7, "d": 3})
    stats.tables.update({"shop.a": {}, "shop.b": {}, "shop.c": {}})
    assert stats.summary() == (
        "silver run r1 ok: 3 table(s), 4 segment(s); changes c=14 u=7 d=3; silver +13 ~1 -2; 0 reset(s), "
        "0 rename copy(ies); 0 quarantined; 0 zero date(s) nulled; 5 new schema version(s); 2.2 s")
    stats.replans = 1
    assert stats.summary().endswith("; 1 segment(s) planned again after another run's commit; 2.2 s")
