"""API keys: made once, stored as SHA-256 hashes, looked up per request."""

from __future__ import annotations

import hashlib
import secrets
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
    return count


def tenant_for_header(session: Session, header: str | None) -> str:
    """Return the tenant id of an `Authorization: Bearer <key>` header, or raise 401."""
    if not header:
        raise Unauthorized("missing Authorization header; send 'Authorization: Bearer <key>'")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("Authorization must be 'Bearer <key>'")
    return tenant_for_key(session, key.strip())


def tenant_for_key(session: Session, key: str) -> str:
    """Return the tenant id of a plain API key, or raise 401 (the compat dialects' way in)."""
    row = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(key)))
    if row is None or row.revoked_at is not None:
        raise Unauthorized("invalid or revoked API key")
    now = utcnow()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        session.execute(update(ApiKey).where(ApiKey.id == row.id).values(last_used_at=now))
        session.commit()
    return row.tenant_id
