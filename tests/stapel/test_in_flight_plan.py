"""The jobs-in-flight count reads only in-flight index entries, even before any analyze."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Compiled

from stapel import quotas
from stapel.tables import Base

HISTORY = 3000
IN_FLIGHT = 7


def scans(plan: dict) -> list[dict]:
    """Return the plan's scans of a table, depth first."""
    found = [plan] if "Relation Name" in plan else []
    for child in plan.get("Plans", []):
        found += scans(child)
    return found


def count_t1(conn, cap: int | None) -> tuple[int, Compiled, dict]:
    """Count tenant t1's jobs in flight as the code does (with a cap: the admission's
    count, on the driver's cursor); return the count, the compiled statement and its
    parameters, for the plan."""
    if cap is None:
        statement = quotas._IN_FLIGHT
        count = conn.execute(statement, {"tenant": "t1"}).scalar()
    else:
        statement = quotas._IN_FLIGHT_UP_TO.statement
        count = quotas._IN_FLIGHT_UP_TO.execute(conn, {"tenant": "t1", "cap": cap})
    compiled = statement.compile(dialect=conn.dialect)
    return count, compiled, {**compiled.params, "tenant": "t1", "cap": cap}


@pytest.mark.parametrize("cap", [None, 1000])
def test_the_count_on_a_table_without_statistics_skips_the_tenants_history(postgres_url, cap):
    """A new database has no statistics until its first analyze; with `status IN (...)`
    PostgreSQL's plan then bounded the scan by the tenant alone and read every job the
    tenant ever had (and a prepared statement kept that plan)."""
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA IF EXISTS probe CASCADE"))
            conn.execute(text("CREATE SCHEMA probe"))
            conn.execute(
                text(
                    "CREATE TABLE probe.jobs (LIKE public.jobs INCLUDING ALL)"
                    " WITH (autovacuum_enabled = false)"  # no analyze behind the test's back
                )
            )
            conn.execute(text("SET LOCAL search_path TO probe"))
            conn.execute(
                text(
                    "INSERT INTO jobs (id, tenant_id, status, pool, source_lang, target_lang,"
                    " priority, documents_total, segments_total, segments_done, chunks_total,"
                    " attempts, callback_attempts, created_at)"
                    " SELECT 'j' || n, 't1', CASE WHEN n <= :flying THEN 'queued'"
                    " ELSE 'succeeded' END, 'cpu', 'en', 'de', 5, 1, 1, 1, 1, 0, 0, now()"
                    " FROM generate_series(1, :total) AS n"
                ),
                {"flying": IN_FLIGHT, "total": HISTORY},
            )
            count, compiled, params = count_t1(conn, cap)
            plan = conn.exec_driver_sql(
                f"EXPLAIN (ANALYZE, FORMAT JSON) {compiled}", params
            ).scalar()
        assert count == IN_FLIGHT
        nodes = scans((plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"])
        assert nodes, plan
        for node in nodes:
            assert "status" in node.get("Index Cond", ""), node
            assert node.get("Rows Removed by Filter", 0) == 0, node
        assert sum(node["Actual Rows"] for node in nodes) == IN_FLIGHT
    finally:
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA IF EXISTS probe CASCADE"))
        engine.dispose()


@pytest.mark.parametrize("cap", [None, 1000])
def test_the_count_reads_the_index_alone_on_sqlite(tmp_path, cap):
    """Each counted job is an index entry, not a row: a selected column sent every
    admission to the table for each of the tenant's jobs in flight."""
    engine = create_engine(f"sqlite:///{tmp_path / 'plan.db'}")
    try:
        Base.metadata.create_all(engine)
        with engine.begin() as conn:
            for n in range(IN_FLIGHT + 3):
                conn.execute(
                    text(
                        "INSERT INTO jobs (id, tenant_id, status, pool, source_lang,"
                        " target_lang, priority, documents_total, segments_total,"
                        " segments_done, chunks_total, attempts, callback_attempts, created_at)"
                        " VALUES (:id, 't1', :status, 'cpu', 'en', 'de', 5, 1, 1, 1, 1, 0, 0,"
                        " CURRENT_TIMESTAMP)"
                    ),
                    {"id": f"j{n}", "status": "running" if n < IN_FLIGHT else "succeeded"},
                )
            count, compiled, params = count_t1(conn, cap)
            plan = [
                row[3]
                for row in conn.exec_driver_sql(
                    f"EXPLAIN QUERY PLAN {compiled}", tuple(params[k] for k in compiled.positiontup)
                )
            ]
        assert count == IN_FLIGHT
        searches = [line for line in plan if line.startswith("SEARCH jobs")]
        assert len(searches) == 2, plan
        assert all("COVERING INDEX ix_jobs_tenant_status" in line for line in searches), plan
    finally:
        engine.dispose()
