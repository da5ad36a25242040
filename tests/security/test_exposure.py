"""What tenants must not see: /metrics behind a token, keys and text out of the logs,
upload names never used as paths."""

from __future__ import annotations

import io
import logging

import pytest

from tests.factories import job_body
from tests.security.conftest import key_for


def test_metrics_token_is_required_and_api_keys_do_not_work(make_app):
    app = make_app(metrics_token="s3cret-scrape-token")
    client, acme = app.test_client(), key_for(app, "acme")
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=acme).status_code == 401, "a tenant key is no token"
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    ok = client.get("/metrics", headers={"Authorization": "Bearer s3cret-scrape-token"})
    assert ok.status_code == 200 and b"stapel_" in ok.data


def test_metrics_are_open_without_a_token(make_app):
    assert make_app().test_client().get("/metrics").status_code == 200


@pytest.mark.parametrize(
    ("filename", "shown"),
    [
        ("../../etc/passwd.txt", "passwd.txt"),
        ("C:\\x\\y.txt", None),
        ("/abs/path/doc.txt", "doc.txt"),
        ("..\\..\\win.txt", None),
        ("plain.TXT", "plain.TXT"),
    ],
)
def test_upload_names_are_reduced_to_a_display_name(client, auth, filename, shown):
    response = client.post(
        "/v1/jobs",
        headers=auth,
        content_type="multipart/form-data",
        data={
            "source_lang": "en",
            "target_lang": "de",
            "files": (io.BytesIO(b"one\ntwo\n"), filename),
        },
    )
    assert response.status_code == 202, response.get_json()
    result = client.get(response.get_json()["links"]["result"], headers=auth).get_json()
    [name] = [d["id"] for d in result["documents"]]
    assert "/" not in name and "\\" not in name and name.endswith((".txt", ".TXT"))
    if shown is not None:  # werkzeug's multipart parser may drop backslashes itself
        assert name == shown


@pytest.mark.parametrize("filename", ["evil.exe", "a.txt.sh", "noext", "../x.pdf"])
def test_only_txt_uploads_are_accepted(client, auth, filename):
    response = client.post(
        "/v1/jobs",
        headers=auth,
        content_type="multipart/form-data",
        data={"source_lang": "en", "target_lang": "de", "files": (io.BytesIO(b"x\n"), filename)},
    )
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "unsupported_file_type"


def test_no_key_or_segment_text_in_logs_at_info(client, api_key, auth, session):
    """A submit, read, result, cancel and callback attempt log neither key nor text."""
    from stapel import callbacks, netguard
    from stapel.tables import Tenant

    secret_text = "Sehr-geheimer-Satz-4711"
    records: list[logging.LogRecord] = []
    handler = logging.Handler(level=logging.INFO)
    handler.emit = records.append
    root = logging.getLogger()
    old_level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    try:
        job = client.post(
            "/v1/jobs",
            headers=auth,
            json=job_body([secret_text], callback_url="https://hooks.example.com/hook"),
        ).get_json()
        assert job is not None
        client.post("/v1/jobs", headers=auth, json=job_body([secret_text], target_lang="xx"))
        client.get(f"/v1/jobs/{job['id']}", headers=auth)
        client.get(f"/v1/jobs/{job['id']}/result", headers=auth)
        client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth)
        client.get("/v1/jobs", headers={"Authorization": f"Bearer {api_key}x"})
        callbacks.deliver(
            session, job["id"], lambda u, b, h: netguard.post("http://127.0.0.1/blocked", b, h)
        )
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    secret = session.query(Tenant.callback_secret).scalar()
    assert records, "the path logged something at INFO"
    for record in records:
        text = record.getMessage() + str(getattr(record, "__dict__", ""))
        assert api_key not in text and api_key[4:] not in text, record.getMessage()
        assert secret_text not in text, record.getMessage()
        assert secret not in text, record.getMessage()
