"""The page at `/` in a real browser (Debian's Chromium, driven by Playwright) on a live
stack: the app over HTTP, a real Celery worker on the demo models, Redis and the DB.

Screenshots of the job list and of a finished job are kept under the test's tmp dir
(`artifacts/`), or under STAPEL_TEST_ARTIFACTS when it is set.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import pytest
import requests

from app import create_app
from tests.factories import sentences
from tests.formats.samples import PO, XLIFF12
from tests.observability.test_flower_e2e import chromium  # noqa: F401 (a fixture)
from tests.workers_proc import ServerThread, stack_worker
from training.corpus import build_corpus

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
playwright_api = pytest.importorskip("playwright.sync_api")
MODELS = Path(__file__).resolve().parents[2] / "models"
DEADLINE_MS = 120_000
WRONG_KEY = "stp_not-a-key"
LONG_LINES = 30_000
"""The job cancelled while it runs: minutes of work for the demo model on two cores."""


@pytest.fixture
def settings_overrides(settings_overrides):
    """The demo models; every job on the cpu pool, so the long one runs on the worker."""
    return {**settings_overrides, "model_root": MODELS, "gpu_threshold": 10 * LONG_LINES}


@pytest.fixture
def worker(app, settings_overrides, tmp_path):
    yield from stack_worker(app, settings_overrides, tmp_path, STAPEL_THREADS="1")


@pytest.fixture
def server(app):
    with ServerThread(app) as srv:
        yield srv


@pytest.fixture
def artifacts(tmp_path) -> Path:
    where = Path(os.environ.get("STAPEL_TEST_ARTIFACTS") or tmp_path / "artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture
def browser(chromium):  # noqa: F811 (the fixture imported above)
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        yield launched
        launched.close()


class Session:
    """One browser context on the page: its requests recorded, signed in with a key."""

    def __init__(self, browser, url: str, width: int = 1100) -> None:
        self.url = url
        self.context = browser.new_context(
            accept_downloads=True, viewport={"width": width, "height": 900}
        )
        self.page = self.context.new_page()
        self.requests: list = []
        self.page.on("request", lambda request: self.requests.append(request))
        self.console: list[str] = []
        self.page.on("console", lambda message: self.console.append(message.text))
        self.page.goto(url + "/")

    def sign_in(self, key: str) -> None:
        self.page.get_by_label("API key").fill(key)
        self.page.get_by_role("button", name="Sign in").click()

    def job(self, job_id: str):
        return self.page.locator(f"li.job[data-job-id='{job_id}']")

    def upload(self, files: list[tuple[str, str, bytes]]) -> dict:
        self.page.locator("#files").set_input_files(
            [{"name": n, "mimeType": t, "buffer": b} for n, t, b in files]
        )
        with self.page.expect_response(
            lambda r: r.url.endswith("/v1/jobs") and r.request.method == "POST"
        ) as answer:
            self.page.get_by_role("button", name="Translate", exact=True).click()
        assert answer.value.status == 202, answer.value.text()
        return answer.value.json()

    def download(self, button) -> bytes:
        with self.page.expect_download() as info:
            button.click()
        return Path(info.value.path()).read_bytes()


def api(server, key: str, path: str) -> requests.Response:
    response = requests.get(server.url + path, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.text
    return response


def test_a_wrong_key_is_refused_and_not_kept(browser, server):
    expect = playwright_api.expect
    user = Session(browser, server.url)
    user.sign_in(WRONG_KEY)
    expect(user.page.locator("#signin-error")).to_contain_text("not accepted")
    expect(user.page.locator("#workspace")).to_be_hidden()
    assert user.page.evaluate("sessionStorage.length") == 0


def test_another_tenants_jobs_stay_hidden(browser, server, api_key, other_key):
    expect = playwright_api.expect
    created = requests.post(
        server.url + "/v1/jobs",
        headers={"Authorization": f"Bearer {api_key}"},
        data={"source_lang": "en", "target_lang": "de"},
        files=[("files", ("app.po", PO))],
    )
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    stranger = Session(browser, server.url)
    stranger.page.keyboard.type(other_key)  # the key field has the focus; Enter signs in
    stranger.page.keyboard.press("Enter")
    expect(stranger.page.locator("#workspace")).to_be_visible()
    expect(stranger.page.locator("#jobs-empty")).to_be_visible(timeout=DEADLINE_MS)
    assert stranger.page.locator("li.job").count() == 0
    status = stranger.page.evaluate(
        """async (id) => (await fetch(`/v1/jobs/${id}`, {headers: {Authorization:
        `Bearer ${sessionStorage.getItem("stapel.key")}`}})).status""",
        job_id,
    )
    assert status == 404, "another tenant's job is not found"
    owner = Session(browser, server.url)
    owner.sign_in(api_key)
    expect(owner.job(job_id)).to_be_visible(timeout=DEADLINE_MS)


def test_upload_watch_download_cancel(browser, server, worker, api_key, artifacts):
    expect = playwright_api.expect
    user = Session(browser, server.url)
    page = user.page

    user.sign_in(api_key)
    expect(page.locator("#workspace")).to_be_visible()
    expect(page.get_by_label("Language pair")).to_contain_text("en → de")
    page.get_by_label("Language pair").select_option("en-de")
    dropped = page.evaluate_handle(
        """() => { const dt = new DataTransfer();
        dt.items.add(new File(["Hello.\\n"], "dropped.txt", {type: "text/plain"}));
        return dt; }"""
    )
    page.dispatch_event("#drop", "drop", {"dataTransfer": dropped})
    expect(page.locator("#file-list li")).to_have_count(1)
    expect(page.locator("#file-list")).to_contain_text("dropped.txt")
    page.get_by_role("button", name="Remove dropped.txt").click()
    expect(page.locator("#file-list li")).to_have_count(0)
    page.locator("#files").set_input_files(
        [{"name": "scan.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-1.4"}]
    )
    page.get_by_role("button", name="Translate", exact=True).click()
    expect(page.locator("#send-error")).to_contain_text("cannot be translated")
    expect(page.locator("#send-error")).to_contain_text("unsupported_file_type")
    page.get_by_role("button", name="Remove scan.pdf").click()
    job = user.upload([("ui.xlf", "application/xliff+xml", XLIFF12), ("app.po", "text/x-po", PO)])
    card = user.job(job["id"])
    expect(page.locator("#usage")).to_contain_text("Jobs in flight:")
    expect(card.locator(".job-progress")).to_have_attribute(
        "data-percent", "100", timeout=DEADLINE_MS
    )
    expect(card.locator(".badge")).to_have_text("succeeded", timeout=DEADLINE_MS)
    expect(card.locator(".doc-progress")).to_have_count(2)
    for bar in card.locator(".doc-progress").all():
        expect(bar).to_have_attribute("data-percent", "100", timeout=DEADLINE_MS)
    card.screenshot(path=str(artifacts / "finished-job.png"))

    for i, button in enumerate(card.locator(".download-doc").all()):
        got = user.download(button)
        want = api(server, api_key, f"/v1/jobs/{job['id']}/result?format=file&document={i}")
        assert got == want.content, f"document {i} differs from the API's"
    archive = zipfile.ZipFile(io.BytesIO(user.download(card.locator(".download-all"))))
    want = zipfile.ZipFile(
        io.BytesIO(api(server, api_key, f"/v1/jobs/{job['id']}/result?format=file").content)
    )
    assert archive.namelist() == want.namelist() == ["ui.xlf", "app.po"]
    for name in archive.namelist():
        assert archive.read(name) == want.read(name)
    assert "<target" in archive.read("ui.xlf").decode()

    lines = "\n".join(sentences(LONG_LINES)).encode()
    long_job = user.upload([("long.txt", "text/plain", lines)])
    long_card = user.job(long_job["id"])
    expect(long_card.locator(".badge")).to_have_text("running", timeout=DEADLINE_MS)
    expect(long_card.locator(".job-progress")).not_to_have_attribute(
        "value", "0", timeout=DEADLINE_MS
    )
    long_card.get_by_role("button", name="Show result so far").click()
    expect(long_card.locator(".preview")).to_contain_text("Translated so far", timeout=DEADLINE_MS)
    page.screenshot(path=str(artifacts / "job-list.png"), full_page=True)
    long_card.get_by_role("button", name="Cancel").click()
    expect(long_card.locator(".badge")).to_have_text("cancelled", timeout=DEADLINE_MS)
    expect(long_card.get_by_role("button", name="Cancel")).to_be_hidden()
    state = api(server, api_key, f"/v1/jobs/{long_job['id']}").json()
    assert state["status"] == "cancelled" and state["segments_done"] < LONG_LINES

    ids = [li.get_attribute("data-job-id") for li in page.locator("li.job").all()]
    assert ids == [long_job["id"], job["id"]], "newest first"
    assert user.context.cookies() == [], "the page sets no cookie"
    assert not [m for m in user.console if "Content Security Policy" in m], user.console
    for request in user.requests:
        assert request.url.startswith(server.url), f"third-party request {request.url}"
        assert api_key not in request.url, "the key never goes in a URL"
        if "/v1/" in request.url:
            assert request.headers.get("authorization") == f"Bearer {api_key}"

    page.set_viewport_size({"width": 360, "height": 800})
    overflow = page.evaluate("document.documentElement.scrollWidth - innerWidth")
    assert overflow <= 0, "the job list fits a narrow screen without sideways scrolling"
    page.get_by_role("button", name="Log out").click()
    expect(page.locator("#signin")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    assert page.locator("li.job").count() == 0
    page.reload()
    expect(page.locator("#signin")).to_be_visible()


def test_the_rate_limit_is_shown_and_waited_for(browser, settings_overrides, api_key):
    expect = playwright_api.expect
    limited = create_app({**settings_overrides, "rate_read": "3/minute"})
    with ServerThread(limited) as srv:
        user = Session(browser, srv.url)
        user.sign_in(api_key)  # languages, the job list, usage: the 3 reads of the minute
        expect(user.page.locator("#workspace")).to_be_visible()
        expect(user.page.locator("#jobs-error")).to_contain_text(
            "rate_limited", timeout=DEADLINE_MS
        )
        expect(user.page.locator("#poll-state")).to_contain_text("Rate limit reached")
        held = [r for r in user.requests if "/v1/" in r.url]
        assert len(held) == 4, [r.url for r in held]
    limited.extensions["stapel"].dispose()


def test_a_named_memory_answers_and_the_origins_are_shown(browser, server, worker, api_key):
    """The tenant's memory of the pair is offered; a job naming it shows where each
    segment came from (memory, cache, machine)."""
    expect = playwright_api.expect
    source, human = "The quarterly report is ready.", "Der Quartalsbericht liegt vor."
    tmx = (
        '<?xml version="1.0" encoding="UTF-8"?><tmx version="1.4"><header srclang="en" '
        'datatype="plaintext" segtype="sentence" adminlang="en" o-tmf="t" creationtool="t" '
        f'creationtoolversion="1"/><body><tu><tuv xml:lang="en"><seg>{source}</seg></tuv>'
        f'<tuv xml:lang="de"><seg>{human}</seg></tuv></tu></body></tmx>'
    )
    made = requests.post(
        server.url + "/v1/memories?source_lang=en&target_lang=de&name=reports",
        headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/x-tmx+xml"},
        data=tmx.encode(),
    )
    assert made.status_code == 201, made.text
    user = Session(browser, server.url)
    user.sign_in(api_key)
    user.page.locator("#pair").select_option("en-de")
    memories = user.page.locator("#memories")
    expect(memories).to_be_visible()
    memories.select_option(made.json()["id"])
    text = f"{source}\nA sentence no memory holds.\n".encode()
    job = user.upload([("report.txt", "text/plain", text)])
    expect(user.job(job["id"]).locator(".job-origins")).to_have_text(
        "Segments from: memory 1 · cache 0 · machine translation 1", timeout=DEADLINE_MS
    )
    result = api(server, api_key, f"/v1/jobs/{job['id']}/result").json()
    assert human in json.dumps(result, ensure_ascii=False)


def test_scores_show_in_the_preview_and_review_is_counted(browser, server, worker, api_key):
    """A job sent with a min_score: its segments for review and its distribution of
    scores are on the card, and the preview marks each segment's score, those for
    review highlighted, with the document's counts."""
    expect = playwright_api.expect
    user = Session(browser, server.url)
    user.sign_in(api_key)
    user.page.locator("#pair").select_option("en-de")
    user.page.get_by_label("Send segments scored under this to review").fill("0.885")
    lines = [english for english, _ in build_corpus(0, 12).test]  # the demo model's grammar
    lines += ["runs we see green.", "see runs small the a green we."]  # outside it: under 0.5
    job = user.upload([("scored.txt", "text/plain", ("\n".join(lines) + "\n").encode())])
    assert job["min_score"] == 0.885
    card = user.job(job["id"])
    expect(card.locator(".badge")).to_have_text("succeeded", timeout=DEADLINE_MS)
    marks = api(server, api_key, f"/v1/jobs/{job['id']}/result").json()["documents"][0][
        "provenance"
    ]
    review = sum(m["review"] for m in marks)
    assert 0 < review < len(lines), "the demo model scores these 0.88 to 0.90"
    expect(card.locator(".job-origins")).to_contain_text(
        f"for review {review} (score under 0.885)", timeout=DEADLINE_MS
    )
    below = api(server, api_key, f"/v1/jobs/{job['id']}/documents").json()["scores"]["below"]
    assert below["0.5"] >= 2
    expect(card.locator(".job-scores")).to_have_text(
        "Machine translations scored under " + " · ".join(f"{b}: {n}" for b, n in below.items())
    )
    card.get_by_role("button", name="Show result").click()
    rows = card.locator(".preview .segments li")
    expect(rows).to_have_count(len(lines))
    expect(card.locator(".segments li.review")).to_have_count(review)
    for i, mark in enumerate(marks):
        expect(rows.nth(i)).to_have_attribute("data-score", f"{mark['score']:.2f}")
    under = sum(m["score"] < 0.885 for m in marks)
    expect(card.locator(".score-counts")).to_have_text(
        f"{under} of {len(lines)} scored segments under 0.885 · {review} for review"
    )
