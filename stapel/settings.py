"""Every setting Stapel reads, parsed from the environment in one place per process.

Each field names its environment variable and its default once (`setting(...)`); the table
in docs/configuration.md lists them. `current()` is the process's one `Settings`; the
Celery configuration (`stapel.celery_config`) is built from it too.
"""

from __future__ import annotations

import functools
import os
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
"""The repository root; embedded defaults live below it."""

DEFAULT_DATABASE_URL = f"sqlite:///{ROOT / 'var' / 'stapel.db'}"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def setting(env: str, default: Any) -> Any:
    """Declare a field read from the environment variable env (default when unset)."""
    return field(default=default, metadata={"env": env})


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


def split_list(raw: str) -> tuple[str, ...]:
    """Split a comma-separated value into stripped, non-empty items."""
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def env_bool(env: dict, name: str, default: bool) -> bool:
    """Return the yes/no setting name from env (1, true, yes, on mean yes)."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Settings:
    """Every setting Stapel reads, parsed to real types; see docs/configuration.md."""

    # Everywhere: where the database, the broker and the models are; logging.
    database_url: str = setting("DATABASE_URL", DEFAULT_DATABASE_URL)
    redis_url: str = setting("REDIS_URL", DEFAULT_REDIS_URL)
    model_root: Path = setting("STAPEL_MODEL_ROOT", ROOT / "models")
    log_level: str = setting("STAPEL_LOG_LEVEL", "INFO")
    log_json: bool = setting("STAPEL_LOG_JSON", False)
    log_dir: Path | None = setting("STAPEL_LOG_DIR", None)
    metrics_port: int = setting("STAPEL_METRICS_PORT", 0)
    # Loopback unless told otherwise (deploy/ sets 0.0.0.0 for the Prometheus scrape).
    metrics_bind: str = setting("STAPEL_METRICS_BIND", "127.0.0.1")

    # The web: what a job may hold, limits and quotas, callbacks it accepts.
    gpu_threshold: int = setting("STAPEL_GPU_THRESHOLD", 3000)
    chunk_segments: int = setting("STAPEL_CHUNK_SEGMENTS", 2000)
    max_segments_per_job: int = setting("STAPEL_MAX_SEGMENTS", 200_000)
    max_segment_chars: int = setting("STAPEL_MAX_SEGMENT_CHARS", 4000)
    max_body_bytes: int = setting("STAPEL_MAX_BODY_BYTES", 64 * 1024 * 1024)
    body_deadline_s: float = setting("STAPEL_BODY_DEADLINE_S", 10.0)
    body_min_rate: int = setting("STAPEL_BODY_MIN_RATE", 64 * 1024)
    body_reads_per_address: int = setting("STAPEL_BODY_READS_PER_ADDRESS", 2)
    max_metadata_bytes: int = setting("STAPEL_MAX_METADATA_BYTES", 4096)
    max_documents_per_job: int = setting("STAPEL_MAX_DOCUMENTS", 10_000)
    # Documents and markup read at once per web process, and of one tenant (app/parse_slots.py).
    parse_slots: int = setting("STAPEL_PARSE_SLOTS", 2)
    parse_slots_per_tenant: int = setting("STAPEL_PARSE_SLOTS_PER_TENANT", 1)
    page_size_max: int = setting("STAPEL_PAGE_SIZE_MAX", 100)
    rate_submit: str = setting("STAPEL_RATE_SUBMIT", "1200/minute")
    rate_read: str = setting("STAPEL_RATE_READ", "12000/minute")
    quota_segments_per_day: int = setting("STAPEL_QUOTA_SEGMENTS_PER_DAY", 5_000_000)
    quota_jobs_in_flight: int = setting("STAPEL_QUOTA_JOBS_IN_FLIGHT", 1000)
    fair_share_step: int = setting("STAPEL_FAIR_SHARE_STEP", 5)
    metrics_token: str = setting("STAPEL_METRICS_TOKEN", "")
    # The compat dialects (app/compat): the interactive lane, characters, retention.
    interactive_timeout_s: float = setting("STAPEL_INTERACTIVE_TIMEOUT_S", 15.0)
    interactive_max_items: int = setting("STAPEL_INTERACTIVE_MAX_ITEMS", 50)
    quota_characters_per_day: int = setting("STAPEL_QUOTA_CHARACTERS_PER_DAY", 0)
    compat_keep_s: float = setting("STAPEL_COMPAT_KEEP_S", 3600.0)
    # Translation memories (stapel/memories.py): per-tenant size, per-upload size.
    memory_quota_entries: int = setting("STAPEL_MEMORY_QUOTA_ENTRIES", 1_000_000)
    memory_max_bytes: int = setting("STAPEL_MEMORY_MAX_BYTES", 64 * 1024 * 1024)
    # Glossaries (stapel/glossaries.py): entries per glossary, glossaries per tenant.
    glossary_max_entries: int = setting("STAPEL_GLOSSARY_MAX_ENTRIES", 10_000)
    glossary_quota: int = setting("STAPEL_GLOSSARY_QUOTA", 1000)

    # Workers: the pool, the engine and its batches, the segment budget.
    pool: str = setting("STAPEL_POOL", "cpu")
    device: str = setting("STAPEL_DEVICE", "auto")
    compute_type: str = setting("STAPEL_COMPUTE_TYPE", "auto")
    threads: int = setting("STAPEL_THREADS", 0)
    parallel_batches: int = setting("STAPEL_PARALLEL_BATCHES", 0)
    max_loaded_models: int = setting("STAPEL_MAX_LOADED_MODELS", 2)
    malloc_tuning: bool = setting("STAPEL_MALLOC_TUNING", True)
    preload: tuple[str, ...] = setting("STAPEL_PRELOAD", ())
    # None: the device's (workers.engine.BATCH_LIMITS).
    batch_tokens: int | None = setting("STAPEL_BATCH_TOKENS", None)
    batch_memory_tokens: int | None = setting("STAPEL_BATCH_MEMORY_TOKENS", None)
    batch_wait_ms: float = setting("STAPEL_BATCH_WAIT_MS", 50.0)
    worker_segments: int = setting("STAPEL_WORKER_SEGMENTS", 4000)
    # None: workers.takealong.PAUSE_OF_BATCH_WAIT of the batch wait (40 ms of 50).
    consume_pause_ms: float | None = setting("STAPEL_CONSUME_PAUSE_MS", None)
    defer_s: float = setting("STAPEL_DEFER_S", 2.0)
    max_decoding_length: int = setting("STAPEL_MAX_DECODING_LENGTH", 256)
    max_input_tokens: int = setting("STAPEL_MAX_INPUT_TOKENS", 0)
    min_decoding_length: int = setting("STAPEL_MIN_DECODING_LENGTH", 1)
    beam_size: int = setting("STAPEL_BEAM_SIZE", 1)
    # A pair no model serves is translated through this language (stapel/pivot.py;
    # "" turns pivoting off).
    pivot: str = setting("STAPEL_PIVOT", "en")
    # Argos packages decode as Argos does with STAPEL_ARGOS_BEAM_SIZE=4 and
    # STAPEL_ARGOS_LENGTH_PENALTY=0.2 (0: STAPEL_BEAM_SIZE; 1.0: no penalty).
    argos_beam_size: int = setting("STAPEL_ARGOS_BEAM_SIZE", 0)
    argos_length_penalty: float = setting("STAPEL_ARGOS_LENGTH_PENALTY", 1.0)
    heartbeat_s: float = setting("STAPEL_HEARTBEAT_S", 10.0)
    tracer_s: float = setting("STAPEL_TRACER_S", 60.0)
    # The MT cache (stapel/mtcache.py): on, shared across tenants, how long entries last.
    cache_enabled: bool = setting("STAPEL_CACHE", True)
    cache_shared: bool = setting("STAPEL_CACHE_SHARED", False)
    cache_ttl_s: float = setting("STAPEL_CACHE_TTL_S", 30 * 86400.0)
    # A job's min_score when it names none (stapel/scores.py; None: no review routing).
    default_min_score: float | None = setting("STAPEL_DEFAULT_MIN_SCORE", None)

    # Control (watchdog, callbacks) and the broker.
    heartbeat_timeout_s: float = setting("STAPEL_HEARTBEAT_TIMEOUT_S", 60.0)
    max_attempts: int = setting("STAPEL_MAX_ATTEMPTS", 3)
    requeue_grace_s: float = setting("STAPEL_REQUEUE_GRACE_S", 30.0)
    watchdog_interval_s: float = setting("STAPEL_WATCHDOG_S", 15.0)
    visibility_timeout_s: int = setting("STAPEL_VISIBILITY_TIMEOUT_S", 6 * 3600)
    callback_allow_hosts: tuple[str, ...] = setting("STAPEL_CALLBACK_ALLOW_HOSTS", ())
    callback_timeout_s: float = setting("STAPEL_CALLBACK_TIMEOUT_S", 10.0)
    callback_max_response_bytes: int = setting("STAPEL_CALLBACK_MAX_RESPONSE_BYTES", 64 * 1024)
    callback_tenant_in_flight: int = setting("STAPEL_CALLBACK_TENANT_IN_FLIGHT", 4)

    @property
    def beat_s(self) -> float:
        """A chunk's longest silence between heartbeats: the period, and at least three a
        timeout (a short timeout in tests must not see a healthy chunk as stalled)."""
        return min(self.heartbeat_s, self.heartbeat_timeout_s / 3)

    def __post_init__(self) -> None:
        hosts = tuple(h.lower() for h in self.callback_allow_hosts)
        if self.default_min_score is not None and not 0 <= self.default_min_score <= 1:
            raise ValueError("STAPEL_DEFAULT_MIN_SCORE must be a number from 0 to 1")
        object.__setattr__(self, "callback_allow_hosts", hosts)

    @classmethod
    def from_env(cls, env: dict | None = None) -> Settings:
        """Build settings from environment variables (STAPEL_*, DATABASE_URL, REDIS_URL)."""
        env = dict(os.environ if env is None else env)
        hints = typing.get_type_hints(cls)
        values = {
            f.name: _parse(env, f.metadata["env"], hints[f.name], f.default) for f in fields(cls)
        }
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """Return a copy with some settings changed (tests and create_app overrides)."""
        hints = typing.get_type_hints(Settings)
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in changes.items():
            values[name] = _coerce(hints[name], value) if isinstance(value, str) else value
        if values["model_root"] is not None:
            values["model_root"] = Path(values["model_root"])
        return Settings(**values)


def _parse(env: dict, name: str, hint: Any, default: Any) -> Any:
    raw = env.get(name)
    if raw is None or raw == "" or default is MISSING:
        return default
    return _coerce(hint, raw, name)


def _coerce(hint: Any, raw: str, name: str = "setting") -> Any:
    """Parse the text raw into the field's type (int, float, bool, Path, str tuple)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) and args:
        hint = args[0]
    if hint is bool:
        return env_bool({name: raw}, name, False)
    if hint is int:
        return env_int({name: raw}, name, 0)
    if hint is float:
        return env_float({name: raw}, name, 0.0)
    if hint is Path:
        return Path(raw)
    if typing.get_origin(hint) is tuple:
        return split_list(raw)
    return raw


@functools.cache
def current() -> Settings:
    """Return this process's settings, read from the environment on first use."""
    return Settings.from_env()
