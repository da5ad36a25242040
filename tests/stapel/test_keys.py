"""Every /v1 endpoint needs a valid key, and a tenant never sees another tenant's job."""

from __future__ import annotations

import pytest

from tests.factories import job_body

ENDPOINTS = [
    ("get", "/v1/jobs/{id}"),
    ("get", "/v1/jobs/{id}/result"),
    ("get", "/v1/jobs/{id}/result?format=txt"),
    ("post", "/v1/jobs/{id}/cancel"),
]


@pytest.fixture
def job_id(client, auth):
    response = client.post("/v1/jobs", json=job_body(), headers=auth)
    assert response.status_code == 202
    return response.get_json()["id"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer "},
    ],
)
@pytest.mark.parametrize(
    ("method", "path"),
    ENDPOINTS + [("get", "/v1/jobs"), ("post", "/v1/jobs"), ("get", "/v1/languages")],
)
def test_missing_or_wrong_key_is_401(client, job_id, headers, method, path):
    response = getattr(client, method)(
        path.format(id=job_id), headers=headers, json=job_body() if method == "post" else None
    )
    assert response.status_code == 401
    assert response.get_json()["error"]["code"] == "unauthorized"
    assert response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_other_tenants_job_is_404(client, job_id, other_key, auth, method, path):
    other = {"Authorization": f"Bearer {other_key}"}
    response = getattr(client, method)(path.format(id=job_id), headers=other)
    assert response.status_code == 404
    assert response.get_json()["error"]["code"] == "not_found"
    # The owner still sees it, so the 404 is about the tenant, not the id.
    owner = getattr(client, method)(path.format(id=job_id), headers=auth)
    assert owner.status_code == 200


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_unknown_job_is_404(client, auth, method, path):
    response = getattr(client, method)(
        path.format(id="00000000-0000-0000-0000-000000000000"), headers=auth
    )
    assert response.status_code == 404


def test_list_shows_only_own_jobs(client, job_id, other_key, auth):
    other = {"Authorization": f"Bearer {other_key}"}
    assert [j["id"] for j in client.get("/v1/jobs", headers=auth).get_json()["jobs"]] == [job_id]
    assert client.get("/v1/jobs", headers=other).get_json()["jobs"] == []


def test_idempotency_key_is_per_tenant(client, auth, other_key):
    key = {"Idempotency-Key": "order-42"}
    first = client.post("/v1/jobs", json=job_body(), headers={**auth, **key})
    again = client.post("/v1/jobs", json=job_body(["different"]), headers={**auth, **key})
    assert first.status_code == 202 and again.status_code == 200
    assert again.get_json()["id"] == first.get_json()["id"]
    other = client.post(
        "/v1/jobs", json=job_body(), headers={"Authorization": f"Bearer {other_key}", **key}
    )
    assert other.status_code == 202
    assert other.get_json()["id"] != first.get_json()["id"]


def test_revoked_key_is_401(runner, client, api_key, auth):
    assert client.get("/v1/jobs", headers=auth).status_code == 200
    result = runner.invoke(args=["keys", "revoke", api_key[:10]])
    assert result.exit_code == 0, result.output
    assert client.get("/v1/jobs", headers=auth).status_code == 401


def test_keys_create_prints_a_working_key(runner, client):
    result = runner.invoke(args=["keys", "create", "--tenant", "initech", "--quiet"])
    assert result.exit_code == 0
    key = result.output.strip()
    assert key.startswith("stp_")
    assert client.get("/v1/jobs", headers={"Authorization": f"Bearer {key}"}).status_code == 200


def test_a_status_read_with_a_key_seen_lately_opens_no_session(app, client, auth, job_id):
    ext = app.extensions["stapel"]
    real, opened = ext.sessions, []

    def counted():
        opened.append(1)
        return real()

    ext.sessions = counted  # the real session factory, its calls counted
    assert client.get(f"/v1/jobs/{job_id}", headers=auth).status_code == 200
    assert opened == []  # the key from this process's cache, the job from one select
    assert (
        client.get(f"/v1/jobs/{job_id}", headers={"Authorization": "Bearer x"}).status_code == 401
    )
    assert opened == [1]  # a key not seen lately is looked up in a session
