"""Settings of the web process, read from the environment in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository root; embedded defaults live below it."""

DEFAULT_DATABASE_URL = f"sqlite:///{ROOT / 'var' / 'stapel.db'}"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def env_int(env: dict, name: str, default: int) -> int:
    """Return the integer setting name from env, or default when unset or empty."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def env_float(env: dict, name: str, default: float) -> float:
    """Return the numeric setting name from env, or default when unset or empty."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None


def env_list(env: dict, name: str) -> tuple[str, ...]:
    """Return the comma-separated setting name from env as a tuple of stripped items."""
    return tuple(p.strip().lower() for p in (env.get(name) or "").split(",") if p.strip())


@dataclass(frozen=True)
class Settings:
    """Every setting Stapel reads, parsed to real types; see the README's table."""

    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str = DEFAULT_REDIS_URL
    model_root: Path = ROOT / "models"
    gpu_threshold: int = 3000
    chunk_segments: int = 2000
    max_segments_per_job: int = 200_000
    max_segment_chars: int = 4000
    max_body_bytes: int = 64 * 1024 * 1024
    max_metadata_bytes: int = 4096
    max_documents_per_job: int = 10_000
    heartbeat_s: float = 10.0
    heartbeat_timeout_s: float = 60.0
    max_attempts: int = 3
    requeue_grace_s: float = 30.0
    watchdog_interval_s: float = 15.0
    page_size_max: int = 100
    pool: str = "cpu"
    metrics_port: int = 0
    tracer_s: float = 60.0
    device: str = "auto"
    compute_type: str = "auto"
    threads: int = 0
    parallel_batches: int = 0
    max_loaded_models: int = 2
    preload: tuple[str, ...] = ()
    batch_tokens: int = 4096
    batch_wait_ms: float = 50.0
    worker_segments: int = 4000
    defer_s: float = 2.0
    max_decoding_length: int = 256
    min_decoding_length: int = 0
    beam_size: int = 1
    rate_submit: str = "60/minute"
    rate_read: str = "600/minute"
    quota_segments_per_day: int = 5_000_000
    quota_jobs_in_flight: int = 200
    fair_share_step: int = 5
    callback_allow_hosts: tuple[str, ...] = ()
    callback_timeout_s: float = 10.0
    callback_max_response_bytes: int = 64 * 1024
    metrics_token: str = ""

    @classmethod
    def from_env(cls, env: dict | None = None) -> Settings:
        """Build settings from environment variables (STAPEL_*, DATABASE_URL, REDIS_URL)."""
        env = dict(os.environ if env is None else env)
        return cls(
            database_url=env.get("DATABASE_URL") or DEFAULT_DATABASE_URL,
            redis_url=env.get("REDIS_URL") or DEFAULT_REDIS_URL,
            model_root=Path(env.get("STAPEL_MODEL_ROOT") or ROOT / "models"),
            gpu_threshold=env_int(env, "STAPEL_GPU_THRESHOLD", 3000),
            chunk_segments=env_int(env, "STAPEL_CHUNK_SEGMENTS", 2000),
            max_segments_per_job=env_int(env, "STAPEL_MAX_SEGMENTS", 200_000),
            max_segment_chars=env_int(env, "STAPEL_MAX_SEGMENT_CHARS", 4000),
            max_body_bytes=env_int(env, "STAPEL_MAX_BODY_BYTES", 64 * 1024 * 1024),
            max_metadata_bytes=env_int(env, "STAPEL_MAX_METADATA_BYTES", 4096),
            max_documents_per_job=env_int(env, "STAPEL_MAX_DOCUMENTS", 10_000),
            heartbeat_s=env_float(env, "STAPEL_HEARTBEAT_S", 10.0),
            heartbeat_timeout_s=env_float(env, "STAPEL_HEARTBEAT_TIMEOUT_S", 60.0),
            max_attempts=env_int(env, "STAPEL_MAX_ATTEMPTS", 3),
            requeue_grace_s=env_float(env, "STAPEL_REQUEUE_GRACE_S", 30.0),
            watchdog_interval_s=env_float(env, "STAPEL_WATCHDOG_S", 15.0),
            pool=env.get("STAPEL_POOL") or "cpu",
            metrics_port=env_int(env, "STAPEL_METRICS_PORT", 0),
            tracer_s=env_float(env, "STAPEL_TRACER_S", 60.0),
            device=env.get("STAPEL_DEVICE") or "auto",
            compute_type=env.get("STAPEL_COMPUTE_TYPE") or "auto",
            threads=env_int(env, "STAPEL_THREADS", 0),
            parallel_batches=env_int(env, "STAPEL_PARALLEL_BATCHES", 0),
            max_loaded_models=env_int(env, "STAPEL_MAX_LOADED_MODELS", 2),
            preload=tuple(p for p in (env.get("STAPEL_PRELOAD") or "").split(",") if p),
            batch_tokens=env_int(env, "STAPEL_BATCH_TOKENS", 4096),
            batch_wait_ms=env_float(env, "STAPEL_BATCH_WAIT_MS", 50.0),
            worker_segments=env_int(env, "STAPEL_WORKER_SEGMENTS", 4000),
            defer_s=env_float(env, "STAPEL_DEFER_S", 2.0),
            max_decoding_length=env_int(env, "STAPEL_MAX_DECODING_LENGTH", 256),
            min_decoding_length=env_int(env, "STAPEL_MIN_DECODING_LENGTH", 0),
            beam_size=env_int(env, "STAPEL_BEAM_SIZE", 1),
            rate_submit=env.get("STAPEL_RATE_SUBMIT") or "60/minute",
            rate_read=env.get("STAPEL_RATE_READ") or "600/minute",
            quota_segments_per_day=env_int(env, "STAPEL_QUOTA_SEGMENTS_PER_DAY", 5_000_000),
            quota_jobs_in_flight=env_int(env, "STAPEL_QUOTA_JOBS_IN_FLIGHT", 200),
            fair_share_step=env_int(env, "STAPEL_FAIR_SHARE_STEP", 5),
            callback_allow_hosts=env_list(env, "STAPEL_CALLBACK_ALLOW_HOSTS"),
            callback_timeout_s=env_float(env, "STAPEL_CALLBACK_TIMEOUT_S", 10.0),
            callback_max_response_bytes=env_int(env, "STAPEL_CALLBACK_MAX_RESPONSE_BYTES",
                                                64 * 1024),
            metrics_token=env.get("STAPEL_METRICS_TOKEN") or "",
        )

    def replace(self, **changes) -> Settings:
        """Return a copy with some settings changed (tests and create_app overrides)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        if isinstance(values["callback_allow_hosts"], str):
            values["callback_allow_hosts"] = env_list(
                {"x": values["callback_allow_hosts"]}, "x")
        if "model_root" in changes:
            values["model_root"] = Path(values["model_root"])
        return Settings(**values)
