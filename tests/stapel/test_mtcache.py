"""The MT cache: scoped lookups in one query, upserts, expiry, purge, model fingerprints."""

from __future__ import annotations

import shutil

from sqlalchemy import func, select, update

from stapel import mtcache
from stapel.keys import create_key
from stapel.scores import Scored, score_of
from stapel.tables import CacheEntry, Tenant, db_now


def scored(entries: dict[str, str], score: float = 0.5) -> dict[str, str]:
    """Entries as a worker stores them: each target with its model's score."""
    return {key: Scored(target, score) for key, target in entries.items()}


def test_entries_are_found_only_in_their_scope_and_for_their_model(any_session):
    s = any_session
    mtcache.store(s, "tenant-a", "fp1", scored({"k1": "eins", "k2": "zwei"}))
    s.commit()
    assert mtcache.lookup(s, "tenant-a", "fp1", ["k1", "k2", "k3"], 3600) == {
        "k1": "eins",
        "k2": "zwei",
    }
    assert mtcache.lookup(s, "tenant-b", "fp1", ["k1"], 3600) == {}  # another tenant
    assert mtcache.lookup(s, "tenant-a", "fp2", ["k1"], 3600) == {}  # another model
    mtcache.store(s, "tenant-a", "fp1", scored({"k1": "EINS"}))  # an upsert, never a duplicate
    s.commit()
    assert mtcache.lookup(s, "tenant-a", "fp1", ["k1"], 3600) == {"k1": "EINS"}


def test_a_hit_carries_the_score_stored_with_it_and_an_unscored_entry_is_a_miss(any_session):
    s = any_session
    mtcache.store(s, "t", "fp", {"k1": Scored("eins", 0.25), "k2": "zwei"})
    s.commit()
    found = mtcache.lookup(s, "t", "fp", ["k1", "k2"], 3600)
    assert found == {"k1": "eins"} and score_of(found["k1"]) == 0.25
    mtcache.store(s, "t", "fp", {"k1": Scored("EINS", 0.75)})  # the upsert takes the new score
    s.commit()
    assert score_of(mtcache.lookup(s, "t", "fp", ["k1"], 3600)["k1"]) == 0.75


def test_expired_entries_are_misses_and_purged(any_session):
    s = any_session
    mtcache.store(s, "t", "fp", scored({"old": "alt", "new": "neu"}))
    s.execute(update(CacheEntry).where(CacheEntry.key == "old").values(created_at=db_now(-7200)))
    s.commit()
    assert mtcache.lookup(s, "t", "fp", ["old", "new"], 3600) == {"new": "neu"}
    assert mtcache.purge_expired(s, 3600) == 1
    assert s.scalar(select(func.count()).select_from(CacheEntry)) == 1


def test_many_keys_are_looked_up_past_the_parameter_limit(any_session):
    s = any_session
    entries = {f"k{i}": f"t{i}" for i in range(2500)}
    mtcache.store(s, "t", "fp", scored(entries))
    s.commit()
    assert mtcache.lookup(s, "t", "fp", list(entries), 3600) == entries


def test_purge_one_tenant_from_the_cli(app, runner):
    with app.extensions["stapel"].sessions() as s:
        create_key(s, "acme")
        create_key(s, "globex")
        ids = dict(s.execute(select(Tenant.name, Tenant.id)).all())
        mtcache.store(s, ids["acme"], "fp", scored({"a": "A"}))
        mtcache.store(s, ids["globex"], "fp", scored({"b": "B"}))
        s.commit()
    result = runner.invoke(args=["cache", "purge", "--tenant", "acme"])
    assert result.exit_code == 0 and "purged 1 cache entries of acme" in result.output
    with app.extensions["stapel"].sessions() as s:
        assert s.scalars(select(CacheEntry.scope)).all() == [ids["globex"]]
    assert runner.invoke(args=["cache", "purge", "--tenant", "nobody"]).exit_code != 0
    assert runner.invoke(args=["cache", "purge"]).exit_code != 0


def test_the_fingerprint_changes_with_the_files_and_the_output_options(model_root, tmp_path):
    copy = tmp_path / "en-de"
    shutil.copytree(model_root / "en-de", copy)
    options = {"beam_size": 1, "max_decoding_length": 24}
    base = mtcache.fingerprint(copy, options)
    assert mtcache.fingerprint(copy, dict(options)) == base
    assert mtcache.fingerprint(copy, {**options, "beam_size": 2}) != base
    with (copy / "model.bin").open("ab") as f:
        f.write(b"\0")  # an updated model
    assert mtcache.fingerprint(copy, options) != base


def test_the_web_metrics_show_the_cache_and_memory_sizes(app, client):
    with app.extensions["stapel"].sessions() as s:
        mtcache.store(s, "t", "fp", scored({"a": "A", "b": "B"}))
        s.commit()
    body = client.get("/metrics").get_data(as_text=True)
    assert "stapel_mt_cache_entries 2.0" in body and "stapel_memory_entries 0.0" in body
