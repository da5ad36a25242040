"""API keys: made once, stored as SHA-256 hashes, looked up per request."""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from stapel.db import affected
from stapel.exceptions import NotFound, Unauthorized
from stapel.tables import ApiKey, Tenant, utcnow

KEY_PREFIX = "stp_"
LAST_USED_RESOLUTION = timedelta(minutes=1)
"""last_used_at is written at most this often per key, to keep reads cheap."""


def hash_key(key: str) -> str:
    """Return the stored form of a key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def get_or_create_tenant(session: Session, name: str) -> Tenant:
    """Return the tenant with this name, creating it (with a callback secret) if needed."""
    tenant = session.scalar(select(Tenant).where(Tenant.name == name))
    if tenant is None:
        tenant = Tenant(name=name, callback_secret=secrets.token_hex(32), created_at=utcnow())
        session.add(tenant)
        session.flush()
    return tenant


def create_key(session: Session, tenant_name: str) -> tuple[ApiKey, str]:
    """Create a key for the tenant (made if missing); return the row and the plain key."""
    tenant = get_or_create_tenant(session, tenant_name)
    plain = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey(
        tenant_id=tenant.id, key_hash=hash_key(plain), prefix=plain[:10], created_at=utcnow()
    )
    session.add(row)
    session.commit()
    return row, plain


def revoke_key(session: Session, prefix: str) -> int:
    """Revoke every live key starting with prefix; return how many."""
    if len(prefix) < len(KEY_PREFIX) + 4:
        raise NotFound("give at least the first 8 characters of the key")
    count = affected(
        session,
        update(ApiKey)
        .where(ApiKey.prefix == prefix[:10], ApiKey.revoked_at.is_(None))
        .values(revoked_at=utcnow()),
    )
    session.commit()
    forget_keys()
    return count


AUTH_CACHE_S = 5.0
"""How long a process trusts a key it looked up: a key revoked elsewhere keeps working in
another web process for at most this long (the process that revokes it forgets it now)."""

AUTH_CACHE_MAX = 10_000
_known: dict[str, tuple[str, float]] = {}
"""Key hash -> (tenant id, monotonic time it was looked up), for live keys only."""
_known_lock = threading.Lock()


def tenant_for_header(session: Callable[[], Session], header: str | None) -> str:
    """Return the tenant id of an `Authorization: Bearer <key>` header, or raise 401.

    `session` gives the session to look the key up in, called only when the key is not
    one looked up lately (a request answered from this process's cache opens none).
    """
    if not header:
        raise Unauthorized("missing Authorization header; send 'Authorization: Bearer <key>'")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("Authorization must be 'Bearer <key>'")
    return tenant_for_key(session, key.strip())


def tenant_for_key(session: Callable[[], Session], key: str) -> str:
    """Return the tenant id of a plain API key, or raise 401 (the compat dialects' way in).

    A key looked up in the last AUTH_CACHE_S costs no query; a lookup writes the key's
    last-used time only when it is older than LAST_USED_RESOLUTION.
    """
    digest = hash_key(key)
    known = _known.get(digest)
    if known is not None and time.monotonic() - known[1] < AUTH_CACHE_S:
        return known[0]
    db = session()
    row = db.scalar(select(ApiKey).where(ApiKey.key_hash == digest))
    if row is None or row.revoked_at is not None:
        raise Unauthorized("invalid or revoked API key")
    now = utcnow()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        db.execute(update(ApiKey).where(ApiKey.id == row.id).values(last_used_at=now))
        db.commit()
    with _known_lock:
        if len(_known) >= AUTH_CACHE_MAX:
            _known.clear()
        _known[digest] = (row.tenant_id, time.monotonic())
    return row.tenant_id


def forget_keys() -> None:
    """Drop this process's looked-up keys (after a revocation)."""
    with _known_lock:
        _known.clear()
