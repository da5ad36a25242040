"""bench.stack: a stack's folder goes when it stops, and stays (said where) when it stops
on an error or when asked to keep it."""

from __future__ import annotations

import pytest

from bench.stack import KEEP_ENV, Stack

pytestmark = pytest.mark.process  # a redis-server of the stack's own


@pytest.fixture
def workdir(monkeypatch, tmp_path):
    for name in ("DATABASE_URL", "REDIS_URL", KEEP_ENV):
        monkeypatch.delenv(name, raising=False)  # its own SQLite file and Redis
    folder = tmp_path / "stack"
    folder.mkdir()
    return folder


def test_a_stack_that_stops_leaves_no_folder(workdir):
    stack = Stack(workdir, {})
    assert (workdir / "bench.db").exists()
    stack.stop()
    assert not workdir.exists()


def test_a_stack_stopped_by_an_error_keeps_its_logs_and_says_where(workdir, capsys):
    stack = Stack(workdir, {})
    with pytest.raises(RuntimeError):
        try:
            raise RuntimeError("a run failed")
        finally:
            stack.stop()
    assert (workdir / "bench.db").exists()
    assert str(workdir) in capsys.readouterr().err


def test_a_stack_asked_to_keep_its_folder_keeps_it(workdir, monkeypatch, capsys):
    monkeypatch.setenv(KEEP_ENV, "1")
    stack = Stack(workdir, {})
    stack.stop()
    assert (workdir / "bench.db").exists()
    assert str(workdir) in capsys.readouterr().err
