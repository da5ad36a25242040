"""The `make run` demo keeps one key for the demo tenant instead of making one per start."""

from __future__ import annotations

import stat

from stapel.demo import demo_key
from stapel.keys import revoke_key, tenant_for_header


def test_demo_key_is_made_once_kept_private_and_reused(any_session, tmp_path):
    path = tmp_path / "var" / "demo.key"
    first = demo_key(any_session, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() == first
    assert demo_key(any_session, path) == first
    assert tenant_for_header(lambda: any_session, f"Bearer {first}")


def test_a_key_the_database_does_not_know_is_replaced(any_session, tmp_path):
    path = tmp_path / "demo.key"
    path.write_text("stp_from-another-database\n")
    replaced = demo_key(any_session, path)
    assert replaced != "stp_from-another-database" and path.read_text().strip() == replaced
    revoke_key(any_session, replaced)
    renewed = demo_key(any_session, path)
    assert renewed != replaced
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
