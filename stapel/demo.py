"""The `make run` demo: a key for the demo tenant, a few sentences translated over HTTP.

The key is made once and kept in var/demo.key (mode 600), so every `make run` prints the
same one; a key the database no longer knows (a new database, a revoked key) is replaced.
It then waits until stopped (an exit would read as finished to `make run`'s supervisor).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import requests
from sqlalchemy.orm import Session

from stapel.db import make_engine, make_session_factory
from stapel.exceptions import Unauthorized
from stapel.keys import create_key, tenant_for_header
from stapel.settings import ROOT, Settings
from stapel.states import FINAL, Status

API = os.environ.get("STAPEL_API_URL", "http://127.0.0.1:8000")
KEY_FILE = ROOT / "var" / "demo.key"
TENANT = "demo"
DEMO = {
    "en-de": [
        "The old man sees the small dog.",
        "We have bought a new car.",
        "The children do not want to play in the garden.",
        "Does the woman read the book?",
    ],
    "de-en": ["Der kleine Hund schläft im Garten.", "Wir haben das Buch gelesen."],
}


def wait_until(check, timeout: float, what: str):
    """Poll check() until it returns a truthy value or timeout seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")


def demo_key(session: Session, path: Path = KEY_FILE) -> str:
    """Return the demo tenant's key kept at path, making (and keeping) one if it is unusable."""
    try:
        key = path.read_text().strip()
        if tenant_for_header(lambda: session, f"Bearer {key}"):
            return key
    except (FileNotFoundError, Unauthorized):
        pass
    _, key = create_key(session, TENANT)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    # Created with 600 from the start: the key is never readable by others, not even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(key + "\n")
    return key


def run_demo() -> None:
    """Print the demo key and a translated job."""
    wait_until(lambda: requests.get(f"{API}/readyz", timeout=2).ok, 120, "the API being ready")
    settings = Settings.from_env()
    with make_session_factory(make_engine(settings.database_url))() as session:
        key = demo_key(session)
    auth = {"Authorization": f"Bearer {key}"}
    pairs = [
        p["pair"]
        for p in requests.get(f"{API}/v1/languages", headers=auth, timeout=5).json()["pairs"]
    ]
    flower = os.environ.get("STAPEL_FLOWER_PORT", "5555")
    print(f"\nStapel is up: API {API}, Flower http://127.0.0.1:{flower}")
    print(f"Demo tenant key (kept in {KEY_FILE.relative_to(ROOT)}): {key}")
    print(f"Try:  curl -H 'Authorization: Bearer {key}' {API}/v1/languages\n")
    pair = "en-de" if "en-de" in pairs else (pairs[0] if pairs else None)
    if pair is None:
        print("No models under STAPEL_MODEL_ROOT; nothing to translate.")
        return
    src, tgt = pair.split("-")
    texts = DEMO.get(pair, DEMO["en-de"])
    started = time.monotonic()
    job = requests.post(
        f"{API}/v1/jobs",
        headers=auth,
        timeout=10,
        json={"source_lang": src, "target_lang": tgt, "segments": texts},
    ).json()
    print(f"Submitted job {job['id']} ({pair}, {len(texts)} segments) to pool {job['pool']}")

    def finished() -> dict | None:
        state = requests.get(API + job["links"]["self"], headers=auth, timeout=5).json()
        return state if state["status"] in FINAL else None

    done = wait_until(finished, 180, "the demo job finishing")
    if done["status"] != Status.SUCCEEDED:
        print(f"Demo job {done['status']}: {done['error']}")
        return
    result = requests.get(API + job["links"]["result"], headers=auth, timeout=10).json()
    print(f"Translated in {time.monotonic() - started:.1f}s:")
    for source, target in zip(texts, result["documents"][0]["segments"], strict=True):
        print(f"  {source}\n    -> {target}")
    print()


def main() -> None:
    try:
        run_demo()
    except (TimeoutError, requests.RequestException, KeyError) as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
