"""The review options of a job over /v1: accepted, shown, defaulted by the operator."""

from __future__ import annotations

import io

import pytest

from tests.factories import job_body


@pytest.fixture
def settings_overrides(settings_overrides):
    """The operator's default min_score is 0.6."""
    return {**settings_overrides, "default_min_score": 0.6}


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        ({}, (0.6, "empty")),  # the operator's default
        ({"min_score": None}, (0.6, "empty")),
        ({"min_score": 0.25, "below_min_score": "source"}, (0.25, "source")),
        ({"min_score": 0}, (0.0, "empty")),  # 0: nothing is under it, the default declined
        ({"min_score": 1}, (1.0, "empty")),
    ],
)
def test_a_job_shows_its_min_score_and_review_count(client, auth, fields, shown):
    created = client.post("/v1/jobs", json=job_body(**fields), headers=auth)
    assert created.status_code == 202, created.get_json()
    status = client.get(created.get_json()["links"]["self"], headers=auth).get_json()
    for job in (created.get_json(), status):
        assert (job["min_score"], job["below_min_score"], job["segments_review"]) == (*shown, 0)


def test_an_upload_takes_the_options_as_form_fields(client, auth):
    data = {"source_lang": "en", "target_lang": "de", "min_score": "0.45"}
    data["below_min_score"] = "source"
    data["files"] = [(io.BytesIO(b"hello\n"), "a.txt")]
    created = client.post("/v1/jobs", data=data, headers=auth, content_type="multipart/form-data")
    assert created.status_code == 202, created.get_json()
    job = created.get_json()
    assert (job["min_score"], job["below_min_score"]) == (0.45, "source")


def test_the_progress_carries_the_score_distribution(client, auth):
    created = client.post("/v1/jobs", json=job_body(min_score=0.5), headers=auth).get_json()
    progress = client.get(f"/v1/jobs/{created['id']}/documents", headers=auth).get_json()
    assert progress["scores"] == {"below": {"0.3": 0, "0.5": 0, "0.7": 0}, "review": 0}


def test_a_compat_dialects_job_is_not_routed_by_the_default(app):
    """The dialects' clients expect a translation for every text: the default is /v1's."""
    from stapel import jobs, submit
    from stapel.keys import create_key
    from stapel.presence import Room

    ext = app.extensions["stapel"]
    with ext.sessions() as s:
        tenant = create_key(s, "acme")[0].tenant_id
        spec = jobs.JobSpec("en", "de", [jobs.DocumentSpec(None, ["hello"])], api="deepl")
        job = submit.submit(s, ext.redis, ext.celery, Room(), ext.settings, tenant, spec).job
        assert job.min_score is None and job.below_min_score is None


def _min_score(client, auth, **fields) -> float | None:
    created = client.post("/v1/jobs", json=job_body(**fields), headers=auth)
    assert created.status_code == 202, created.get_json()
    return created.get_json()["min_score"]


def test_a_tenants_default_comes_before_the_operators(runner, client, auth):
    """`flask --app app tenants min-score` sets a tenant's default; a job's own wins."""
    assert _min_score(client, auth) == 0.6  # the operator's, until the tenant has one
    result = runner.invoke(args=["tenants", "min-score", "acme", "0.35"])
    assert result.exit_code == 0, result.output
    assert "tenant=acme min_score=0.35" in result.output
    assert _min_score(client, auth) == 0.35
    assert _min_score(client, auth, min_score=0.8) == 0.8
    assert runner.invoke(args=["tenants", "min-score", "acme", "off"]).exit_code == 0
    assert _min_score(client, auth) == 0.6


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("acme", "1.5", "from 0 to 1"),
        ("acme", "high", "from 0 to 1"),
        ("nobody", "0.5", "no tenant"),
    ],
)
def test_a_tenants_default_is_checked(runner, auth, name, value, said):
    result = runner.invoke(args=["tenants", "min-score", name, value])
    assert result.exit_code != 0 and said in result.output
