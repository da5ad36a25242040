"""One Stapel deployment per scenario: the app, workers, beat, and the checks after a fault.

A `Stack` runs the Flask app (test client) and real `celery worker` / `celery beat`
processes on a given DB and Redis, with short watchdog settings passed through the
environment. `Stack.verify` compares every job's stored result with a clean run of the
engine and counts what was lost or written twice; the figures go to the fault report.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sqlalchemy import exists, select, text
from sqlalchemy.orm import Session, sessionmaker

from app import create_app
from stapel.keys import create_key
from stapel.states import ACTIVE
from stapel.tables import Chunk, Job, Segment
from tests.factories import sentences, wait_for
from tests.faults.procs import BeatProcess, GroupWorker
from workers.engine import Engine

SHORT_ENV = {
    "STAPEL_WATCHDOG_S": "1",
    "STAPEL_HEARTBEAT_TIMEOUT_S": "3",
    "STAPEL_REQUEUE_GRACE_S": "1",
    "STAPEL_MAX_ATTEMPTS": "3",
    "STAPEL_MAX_DECODING_LENGTH": "24",
    "STAPEL_BATCH_TOKENS": "64",
    "STAPEL_THREADS": "1",
    "STAPEL_DEVICE": "cpu",
    "STAPEL_COMPUTE_TYPE": "float32",  # batch-invariant (below)
    "STAPEL_LOG_LEVEL": "INFO",
}
"""Settings every scenario's processes share: a watchdog every second, a 3 s heartbeat
timeout, a 1 s resend grace, and small batches so a job has many heartbeats.

float32, not int8: with int8 on CPU a near-tie of the random model's logits can come out
either way depending on the batch's other rows (a sentence alone vs beside ten others
of other lengths, measured: docs/reliability.md), and `wrong` compares with a run whose
batches are cut differently; float32 gave one output for a sentence across every batch
tried, so any difference the suite finds is a fault of Stapel's."""

DONE = ("succeeded", "failed", "cancelled")
DEADLINE_S = 120
"""Generous deadline for any wait: the machine is small and shared."""


class Reference:
    """A clean run: the engine with the workers' settings, translating in one process."""

    def __init__(self, model_root: Path) -> None:
        self.engine = Engine(
            model_root,
            device="cpu",
            compute_type=SHORT_ENV["STAPEL_COMPUTE_TYPE"],
            threads=1,
            batch_tokens=int(SHORT_ENV["STAPEL_BATCH_TOKENS"]),
            max_decoding_length=int(SHORT_ENV["STAPEL_MAX_DECODING_LENGTH"]),
        )
        self._cache: dict[tuple[str, ...], list[str]] = {}

    def translate(self, texts: list[str]) -> list[str]:
        key = tuple(texts)
        if key not in self._cache:
            self._cache[key] = self.engine.translate("en-de", texts)
        return self._cache[key]


@dataclass
class Figures:
    """What one scenario submitted, what came out, and how long recovery took."""

    scenario: str
    submitted: int = 0
    succeeded: int = 0
    failed: int = 0
    lost: int = 0
    wrong: int = 0
    wrong_examples: list = field(default_factory=list)
    """(job, index, source, got, expected) of the first wrong segments of each job."""
    duplicated: int = 0
    segments: int = 0
    claims: int = 0
    attempts_max: int = 0
    recover_s: float | None = None
    stuck: int = 0
    """Jobs queued or running whose chunks had all ended, anywhere in the DB (must be 0)."""
    notes: dict = field(default_factory=dict)


class Stack:
    """The app plus worker and beat processes on one DB and one Redis."""

    def __init__(
        self,
        *,
        db_url: str,
        redis_url: str,
        model_root: Path,
        sessions: sessionmaker,
        log_dir: Path,
        env: dict | None = None,
        app_overrides: dict | None = None,
        chunk_segments: int = 2000,
    ) -> None:
        self.db_url, self.redis_url, self.log_dir = db_url, redis_url, log_dir
        self.sessions = sessions
        self.env = {
            "DATABASE_URL": db_url,
            "REDIS_URL": redis_url,
            "STAPEL_MODEL_ROOT": str(model_root),
            "STAPEL_CHUNK_SEGMENTS": str(chunk_segments),
            **SHORT_ENV,
            **(env or {}),
        }
        self.app = create_app(
            {
                "database_url": db_url,
                "redis_url": redis_url,
                "model_root": model_root,
                "chunk_segments": chunk_segments,
                **(app_overrides or {}),
            }
        )
        self.client = self.app.test_client()
        self.celery = self.app.extensions["stapel"].celery
        with self.app.extensions["stapel"].sessions() as s:
            self.auth = {"Authorization": f"Bearer {create_key(s, 'faults')[1]}"}
        self.workers: list[GroupWorker] = []
        self.beat: BeatProcess | None = None
        self.texts: dict[str, list[str]] = {}

    # processes -----------------------------------------------------------------------
    def worker(
        self,
        name: str,
        concurrency: int = 2,
        env: dict | None = None,
        queues: str | None = None,
    ) -> GroupWorker:
        """Start a worker (on the cpu and control queues, or those given); wait until it answers."""
        proc = GroupWorker(
            {**self.env, **(env or {})},
            self.log_dir,
            concurrency=concurrency,
            name=name,
            queues=queues,
        )
        self.workers.append(proc)
        return proc.start(self.celery)

    def start_beat(self) -> BeatProcess:
        self.beat = BeatProcess(self.env, self.log_dir)
        return self.beat.start()

    def start(self, *names: str, concurrency: int = 2, beat: bool = True) -> list[GroupWorker]:
        """Start beat and the named workers side by side; wait until all are up."""
        if beat:
            self.beat = BeatProcess(self.env, self.log_dir).launch()
        started = [
            GroupWorker(self.env, self.log_dir, concurrency=concurrency, name=name).launch()
            for name in names
        ]
        self.workers.extend(started)
        for proc in started:
            proc.wait_ready(self.celery)
        if self.beat is not None:
            self.beat.wait_ready()
        return started

    def launch(self, *specs: tuple[str, str | None, int, dict]) -> dict[str, GroupWorker]:
        """Start workers (name, queues or None for the pool's, concurrency, extra env)
        side by side; wait until all answer; return them by name."""
        procs = {
            name: GroupWorker(
                {**self.env, **env}, self.log_dir, concurrency=c, name=name, queues=queues
            ).launch()
            for name, queues, c, env in specs
        }
        self.workers.extend(procs.values())
        for proc in procs.values():
            proc.wait_ready(self.celery)
        return procs

    def close(self) -> None:
        """Stop every process this stack started, then the app's connections."""
        for proc in self.workers:
            proc.close()
        if self.beat is not None:
            self.beat.close()
        self.app.extensions["stapel"].dispose()

    def logs(self) -> str:
        return "".join(w.full_log() for w in self.workers)

    # jobs ----------------------------------------------------------------------------
    def post_job(self, texts: list[str], idempotency_key: str | None = None):
        """POST one en-de job; return the response (remembering the texts if accepted)."""
        headers = dict(self.auth)
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        response = self.client.post(
            "/v1/jobs",
            json={"source_lang": "en", "target_lang": "de", "segments": texts},
            headers=headers,
        )
        if response.status_code in (200, 202):
            self.texts[response.get_json()["id"]] = texts
        return response

    def submit(self, sizes: list[int], seed: int = 0) -> list[str]:
        """Submit one en-de job per size over the API (202 each); return their ids."""
        ids = []
        for n, size in enumerate(sizes):
            response = self.post_job(sentences(size, seed=seed + n))
            assert response.status_code == 202, response.get_json()
            ids.append(response.get_json()["id"])
        return ids

    def jobs(self, ids: list[str]) -> dict[str, Job]:
        with self.sessions() as s:
            return {j.id: j for j in s.scalars(select(Job).where(Job.id.in_(ids)))}

    def chunks(self, job_id: str) -> list[Chunk]:
        with self.sessions() as s:
            return list(s.scalars(select(Chunk).where(Chunk.job_id == job_id).order_by(Chunk.idx)))

    def running_on(self, job_id: str) -> Chunk | None:
        """Return a running chunk of the job with progress written, if there is one."""
        return next((c for c in self.chunks(job_id) if c.status == "running" and c.done > 0), None)

    def wait_done(self, ids: list[str], timeout: float = DEADLINE_S) -> float:
        """Wait until every job ended; return the monotonic time it happened.

        On a timeout the failure shows the workers as they are then: alive or not, their
        errors, and the end of their logs.
        """
        try:
            wait_for(
                lambda: all(j.status in DONE for j in self.jobs(ids).values()),
                timeout=timeout,
                interval=0.2,
                what=f"{len(ids)} jobs to finish",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnosis()}") from None
        return time.monotonic()

    def diagnosis(self) -> str:
        """Each worker's state, its ERROR and CRITICAL lines, and its log's last lines."""
        parts = []
        for proc in self.workers:
            lines = proc.full_log().splitlines()
            errors = [line for line in lines if " ERROR " in line or " CRITICAL " in line]
            parts.append(
                f"== worker {proc.name} {'alive' if proc.alive() else 'exited'}\n"
                + "\n".join(errors[-20:])
                + "\n-- last lines:\n"
                + "\n".join(lines[-40:])
            )
        return "\n".join(parts)

    # checks --------------------------------------------------------------------------
    def verify(
        self,
        scenario: str,
        ids: list[str],
        reference: Reference,
        expect: dict[str, str] | None = None,
    ) -> Figures:
        """Compare every job with a clean run and count lost and twice-written segments,
        then check the invariant every scenario ends with: no job in the database is
        queued or running while all its chunks have ended.

        `expect` maps job id to its expected end state (default: succeeded).
        """
        figures = Figures(scenario, submitted=len(ids))
        jobs = self.jobs(ids)
        logs = self.logs()
        with self.sessions() as s:
            for job_id in ids:
                job = jobs[job_id]
                figures.succeeded += job.status == "succeeded"
                figures.failed += job.status == "failed"
                figures.attempts_max = max(figures.attempts_max, job.attempts)
                figures.claims += len(re.findall(f"chunk claimed logid={job_id} ", logs))
                if (expect or {}).get(job_id, "succeeded") != "succeeded":
                    continue
                rows = s.execute(
                    select(Segment.idx, Segment.target)
                    .where(Segment.job_id == job_id)
                    .order_by(Segment.idx)
                ).all()
                texts = self.texts[job_id]
                figures.segments += len(texts)
                got = {idx: target for idx, target in rows if target is not None}
                figures.lost += len(texts) - len(got)
                assert [idx for idx, _ in rows] == list(range(len(texts)))
                expected = reference.translate(texts)
                wrong = [i for i in range(len(texts)) if got.get(i) not in (None, expected[i])]
                figures.wrong += len(wrong)
                figures.wrong_examples += [
                    (job_id, i, texts[i], got[i], expected[i]) for i in wrong[:3]
                ]
            figures.duplicated = duplicated_writes(s, ids)
            stuck = stuck_jobs(s)
        figures.stuck = len(stuck)
        assert not stuck, f"jobs queued or running with all chunks ended: {stuck}"
        return figures

    def result_via_api(self, job_id: str) -> list[str | None]:
        response = self.client.get(f"/v1/jobs/{job_id}/result", headers=self.auth)
        assert response.status_code == 200
        return [t for d in response.get_json()["documents"] for t in d["segments"]]


# Every UPDATE that writes a translation is logged by a trigger, so a segment written
# twice (by two workers, or by a worker that lost its claim) shows up as two rows.
SQLITE_TRIGGER = [
    "CREATE TABLE IF NOT EXISTS fault_writes (job_id VARCHAR(36), idx INTEGER)",
    "DROP TRIGGER IF EXISTS fault_count_writes",
    "CREATE TRIGGER fault_count_writes AFTER UPDATE OF target ON segments "
    "WHEN NEW.target IS NOT NULL BEGIN "
    "INSERT INTO fault_writes (job_id, idx) VALUES (NEW.job_id, NEW.idx); END",
    "DELETE FROM fault_writes",
]
POSTGRES_TRIGGER = [
    "CREATE TABLE IF NOT EXISTS fault_writes (job_id VARCHAR(36), idx INTEGER)",
    "CREATE OR REPLACE FUNCTION fault_count_writes() RETURNS trigger AS $$ BEGIN "
    "INSERT INTO fault_writes (job_id, idx) VALUES (NEW.job_id, NEW.idx); RETURN NEW; "
    "END $$ LANGUAGE plpgsql",
    "DROP TRIGGER IF EXISTS fault_count_writes ON segments",
    "CREATE TRIGGER fault_count_writes AFTER UPDATE OF target ON segments FOR EACH ROW "
    "WHEN (NEW.target IS NOT NULL) EXECUTE FUNCTION fault_count_writes()",
    "DELETE FROM fault_writes",
]


def stuck_jobs(session: Session) -> list[str]:
    """Ids of jobs queued or running none of whose chunks is queued or running."""
    active_chunk = exists().where(Chunk.job_id == Job.id, Chunk.status.in_(ACTIVE))
    return list(session.scalars(select(Job.id).where(Job.status.in_(ACTIVE), ~active_chunk)))


def install_write_counter(engine) -> None:
    """Log every translation written to segments in the table fault_writes."""
    statements = POSTGRES_TRIGGER if engine.dialect.name == "postgresql" else SQLITE_TRIGGER
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))


def duplicated_writes(session: Session, ids: list[str]) -> int:
    """Return how many segment writes of these jobs went to a segment already written."""
    if not ids:
        return 0
    params = {f"j{n}": job_id for n, job_id in enumerate(ids)}
    names = ", ".join(f":{k}" for k in params)
    return int(
        session.execute(
            text(
                "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM fault_writes "
                f"WHERE job_id IN ({names}) GROUP BY job_id, idx) AS w"
            ),
            params,
        ).scalar()
    )


def record(report_path: Path, config: str, figures: Figures) -> None:
    """Merge one scenario's figures into the JSON report, under this configuration."""
    report_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = json.loads(report_path.read_text())
    except (OSError, ValueError):
        data = {}
    entry = asdict(figures)
    entry["recorded_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    data.setdefault(config, {})[figures.scenario] = entry
    report_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def killed_by_hook(stack, fault: str, said: str, concurrency: int) -> GroupWorker:
    """Start a worker with the test hook `fault` (workers/faults.py) on the jobs queued
    in stack; wait for the hook to kill it and check its log says `said`."""
    victim = GroupWorker(
        {**stack.env, "STAPEL_TEST_FAULT": fault},
        stack.log_dir,
        concurrency=concurrency,
        name="victim",
    ).launch()
    stack.workers.append(victim)
    wait_for(lambda: not victim.alive(), timeout=DEADLINE_S, what="the hook to kill the worker")
    assert said in victim.full_log()
    return victim


def broken_copy(model_root: Path, into: Path, pair: str, name: str) -> Path:
    """Copy model_root to `into`, with garbage in the pair directory's file `name` (a
    failed sync: the directory looks complete)."""
    shutil.copytree(model_root, into)
    (into / pair / name).write_bytes(b"not a model file" * 10)
    return into
