"""app.server's settings from the environment: the bind address and the counts."""

from __future__ import annotations

import pytest

from app.server import bind_address, options


@pytest.mark.parametrize(
    ("bind", "address"),
    [
        ("127.0.0.1:8000", ("127.0.0.1", 8000)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("[::]:8000", ("::", 8000)),
        ("[::1]:65535", ("::1", 65535)),
    ],
)
def test_a_bind_is_split_into_address_and_port(bind, address):
    assert bind_address(bind) == address


@pytest.mark.parametrize("bind", ["foo", ":8000", "host:", "host:0", "host:65536", "h:8o"])
def test_a_bad_bind_stops_with_the_setting_named(bind):
    with pytest.raises(SystemExit, match=f"STAPEL_BIND must be host:port, not '{bind}'"):
        bind_address(bind)


def test_defaults_and_values_from_the_environment():
    default = options({})
    assert (default["address"], default["port"], default["workers"]) == ("127.0.0.1", 8000, 2)
    assert (default["blocking_threads"], default["workers_kill_timeout"]) == (4, 30)
    assert default["respawn_failed_workers"] and default["factory"]
    given = options({"STAPEL_WEB_WORKERS": " 3 ", "STAPEL_WEB_GRACE_S": "5", "STAPEL_BIND": ""})
    assert (given["workers"], given["workers_kill_timeout"], given["port"]) == (3, 5, 8000)
    with pytest.raises(SystemExit, match="STAPEL_WEB_GRACE_S must be a whole number"):
        options({"STAPEL_WEB_GRACE_S": "-1"})
