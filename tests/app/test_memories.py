"""Translation memories over HTTP: import TMX, list, download, delete; bad input; isolation."""

from __future__ import annotations

import io

import pytest

from tests.factories import job_body


def tmx(units: list[tuple[str, str]], src: str = "en", tgt: str = "de", srclang: str = "") -> bytes:
    def tuv(lang: str, text: str) -> str:
        return f'<tuv xml:lang="{lang}"><seg>{text}</seg></tuv>'

    body = "".join(f"<tu>{tuv(src, s)}{tuv(tgt, t)}</tu>" for s, t in units)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4">\n'
        f'<header srclang="{srclang or src}" segtype="sentence" datatype="plaintext" '
        'adminlang="en" creationtool="t" creationtoolversion="1" o-tmf="t"/>\n'
        f"<body>{body}</body></tmx>\n"
    ).encode()


def upload(client, auth, data: bytes, pair=("en", "de"), name="product"):
    return client.post(
        f"/v1/memories?source_lang={pair[0]}&target_lang={pair[1]}&name={name}",
        data=data,
        headers={**auth, "Content-Type": "application/x-tmx+xml"},
    )


def test_memory_round_trip_list_download_delete(client, auth):
    created = upload(
        client, auth, tmx([("Hello world.", "Hallo Welt."), ("A &amp; B", "A &amp; B")])
    )
    assert created.status_code == 201, created.get_json()
    memory = created.get_json()
    assert memory["entries"] == 2 and memory["source_lang"] == "en"
    listed = client.get("/v1/memories", headers=auth).get_json()["memories"]
    assert [m["id"] for m in listed] == [memory["id"]]
    exported = client.get(memory["links"]["tmx"], headers=auth)
    assert exported.status_code == 200 and exported.mimetype == "application/x-tmx+xml"
    again = upload(client, auth, exported.data)  # what comes out goes back in
    assert again.status_code == 201 and again.get_json()["entries"] == 2
    assert b"<seg>Hallo Welt.</seg>" in exported.data and b"A &amp; B" in exported.data
    assert client.delete(memory["links"]["self"], headers=auth).status_code == 204
    assert client.get(memory["links"]["self"], headers=auth).status_code == 404


def test_a_multipart_upload_takes_the_file_part_and_the_form_fields(client, auth):
    data = tmx([("Hello world.", "Hallo Welt.")])
    created = client.post(
        "/v1/memories",
        data={
            "source_lang": "en",
            "target_lang": "de",
            "name": "ui",
            "file": (io.BytesIO(data), "ui.tmx"),
        },
        headers=auth,
        content_type="multipart/form-data",
    )
    assert created.status_code == 201, created.get_json()
    assert (created.get_json()["name"], created.get_json()["entries"]) == ("ui", 1)
    no_file = client.post(
        "/v1/memories",
        data={"source_lang": "en", "target_lang": "de", "other": (io.BytesIO(data), "x.tmx")},
        headers=auth,
        content_type="multipart/form-data",
    )
    assert no_file.status_code == 400 and "'file'" in no_file.get_json()["error"]["message"]
    no_pair = client.post(
        "/v1/memories",
        data={"file": (io.BytesIO(data), "ui.tmx")},
        headers=auth,
        content_type="multipart/form-data",
    )
    assert no_pair.status_code == 400 and no_pair.get_json()["error"]["code"] == "missing_field"
    broken = client.post(
        "/v1/memories?source_lang=en&target_lang=de",
        data={"file": (io.BytesIO(data[:-20]), "ui.tmx")},
        headers=auth,
        content_type="multipart/form-data",
    )
    assert broken.status_code == 400 and broken.get_json()["error"]["code"] == "invalid_tmx"


def test_another_tenants_memory_is_404_everywhere(client, auth, other_key):
    memory = upload(client, auth, tmx([("Hello.", "Hallo.")])).get_json()
    other = {"Authorization": f"Bearer {other_key}"}
    assert client.get(memory["links"]["self"], headers=other).status_code == 404
    assert client.get(memory["links"]["tmx"], headers=other).status_code == 404
    assert client.delete(memory["links"]["self"], headers=other).status_code == 404
    assert client.get("/v1/memories", headers=other).get_json()["memories"] == []
    job = client.post("/v1/jobs", json=job_body(memories=[memory["id"]]), headers=other)
    assert job.status_code == 404, job.get_json()
    assert job.get_json()["error"]["code"] == "not_found"


BAD = [
    (b"<tmx><body><tu><tuv xml:lang='en'><seg>x</seg></tuv>", "invalid_tmx", "line 1"),
    (
        b'<?xml version="1.0"?>\n<tmx version="1.4">\n<body>\n  <tu>\n</body></tmx>',
        "invalid_tmx",
        "line 5",
    ),
    (b"<html><body/></html>", "invalid_tmx", "not <tmx>"),
    (b"", "invalid_tmx", "line"),
]


@pytest.mark.parametrize("data,code,where", BAD)
def test_malformed_tmx_is_400_with_line_and_column(client, auth, data, code, where):
    response = upload(client, auth, data)
    assert response.status_code == 400, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == code and where in error["message"] and "column" in error["message"]
    assert client.get("/v1/memories", headers=auth).get_json()["memories"] == []  # nothing kept


def test_a_tmx_of_another_pair_is_400(client, auth):
    french = upload(client, auth, tmx([("Hello.", "Bonjour.")], tgt="fr"))
    assert french.status_code == 400 and "has no en and de" in french.get_json()["error"]["message"]
    header = upload(client, auth, tmx([("Hallo.", "Hello.")], src="de", tgt="en"))
    assert header.status_code == 400 and "srclang is de" in header.get_json()["error"]["message"]


def test_a_job_naming_a_memory_of_another_pair_is_400(client, auth):
    memory = upload(
        client, auth, tmx([("Hallo.", "Hello.")], src="de", tgt="en"), pair=("de", "en")
    )
    assert memory.status_code == 201
    job = client.post("/v1/jobs", json=job_body(memories=[memory.get_json()["id"]]), headers=auth)
    assert job.status_code == 400 and job.get_json()["error"]["code"] == "memory_pair_mismatch"


class TestLimits:
    @pytest.fixture
    def settings_overrides(self, settings_overrides):
        return {**settings_overrides, "memory_quota_entries": 3, "memory_max_bytes": 4000}

    def test_the_memory_quota_is_429_and_the_upload_limit_413_naming_it(self, client, auth):
        assert upload(client, auth, tmx([("a.", "A."), ("b.", "B.")])).status_code == 201
        full = upload(client, auth, tmx([("c.", "C."), ("d.", "D.")]))
        assert full.status_code == 429, full.get_json()
        assert "3 translation units" in full.get_json()["error"]["message"]
        big = upload(client, auth, tmx([(f"s{i}.", f"S{i}.") for i in range(100)]))
        assert big.status_code == 413 and "4000 bytes" in big.get_json()["error"]["message"]
        as_form = client.post(
            "/v1/memories?source_lang=en&target_lang=de",
            data={"file": (io.BytesIO(tmx([(f"s{i}.", f"S{i}.") for i in range(100)])), "a")},
            headers=auth,
            content_type="multipart/form-data",
        )
        assert as_form.status_code == 413
        assert len(client.get("/v1/memories", headers=auth).get_json()["memories"]) == 1
