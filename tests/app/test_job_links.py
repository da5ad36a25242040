"""A job's links are written out by hand (no route lookup per link): they must stay the
routes' own paths, under whatever root the app is mounted at."""

from __future__ import annotations

import pytest
from flask import url_for

from app.api.jobs import job_links


@pytest.mark.parametrize("root", ["", "/stapel"])
def test_a_jobs_links_are_its_routes_paths(app, root):
    job_id = "0f8c7a2e-1b2c-4d5e-9f00-123456789abc"
    with app.test_request_context("/v1/jobs", base_url=f"http://localhost{root}/"):
        links = job_links(job_id)
        assert links == {
            "self": url_for("v1.get_job", job_id=job_id),
            "result": url_for("v1.get_result", job_id=job_id),
            "cancel": url_for("v1.cancel_job", job_id=job_id),
        }
    assert links["self"] == f"{root}/v1/jobs/{job_id}"


def test_the_self_link_of_a_new_job_reads_it(client, auth):
    job = client.post(
        "/v1/jobs",
        json={"source_lang": "en", "target_lang": "de", "segments": ["Hello."]},
        headers=auth,
    ).get_json()
    assert client.get(job["links"]["self"], headers=auth).get_json()["id"] == job["id"]
