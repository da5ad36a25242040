"""A worker's metrics exporter binds loopback unless STAPEL_METRICS_BIND says otherwise."""

from __future__ import annotations

import psutil
import requests

from stapel import metrics, settings
from tests.conftest import free_port


def listening_addresses(port: int) -> set[str]:
    return {
        c.laddr.ip
        for c in psutil.Process().net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    }


def test_exporter_binds_loopback_by_default(monkeypatch):
    monkeypatch.delenv("STAPEL_METRICS_BIND", raising=False)
    settings.current.cache_clear()
    try:
        port = metrics.start_exporter(free_port())
    finally:
        settings.current.cache_clear()
    assert port is not None
    assert listening_addresses(port) == {"127.0.0.1"}
    assert (
        "stapel_segments_translated_total"
        in requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    )


def test_exporter_binds_where_it_is_told():
    port = metrics.start_exporter(free_port(), addr="0.0.0.0")
    assert port is not None and listening_addresses(port) == {"0.0.0.0"}
