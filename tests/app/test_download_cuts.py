"""A download whose database read fails half-way answers an error, never a short 200.

PostgreSQL only: the test terminates the web's backends between two pages of a memory's
units, as a failover or an operator's reset would.
"""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from stapel import memories
from tests.app.test_memories import tmx, upload

PAGE = 50
UNITS = 120
"""Three pages: the reset falls between the first and the second."""


@pytest.fixture
def database_url(postgres_url):
    return postgres_url


def terminate_backends(url: str) -> int:
    """Terminate every other backend of url's database; return how many."""
    admin = create_engine(url)
    try:
        with admin.connect() as conn:
            return len(
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                ).all()
            )
    finally:
        admin.dispose()


@pytest.fixture
def memory(client, auth) -> dict:
    units = [(f"Sentence number {n}.", f"Satz Nummer {n}.") for n in range(UNITS)]
    return upload(client, auth, tmx(units)).get_json()


def test_a_memory_download_goes_out_whole_with_its_length(client, auth, memory):
    whole = client.get(memory["links"]["tmx"], headers=auth)
    assert whole.status_code == 200
    assert whole.headers.get("Content-Length") == str(len(whole.data))
    assert whole.data.count(b"<tu>") == UNITS


def test_a_memory_download_cut_by_a_reset_is_a_503_not_a_short_200(
    client, auth, memory, database_url, monkeypatch
):
    real = memories.iter_units
    cuts: list[int] = []

    def reset_after_the_first_page(session, memory_id, page=PAGE):
        for n, unit in enumerate(real(session, memory_id, PAGE)):
            yield unit
            if n == PAGE - 1:
                cuts.append(terminate_backends(database_url))

    monkeypatch.setattr(memories, "iter_units", reset_after_the_first_page)
    cut = client.get(memory["links"]["tmx"], headers=auth)
    assert cut.status_code == 503, cut.status_code  # a streamed body: 200, then it broke
    assert cuts and cuts[0] >= 1, "the web's backend was terminated mid-read"
    assert cut.get_json()["error"]["code"] == "database_unavailable"
    assert cut.headers.get("Retry-After")
