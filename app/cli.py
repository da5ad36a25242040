"""Operator commands: `flask --app app keys create --tenant acme`, `keys revoke`, `keys list`,
`jobs requeue ID`, `jobs cancel ID`, `jobs purge --older-than-days N`,
`cache purge --tenant acme` (or `--shared`, `--expired`), `tenants min-score acme 0.5`
(a tenant's default min_score), `models` (what the model root serves, and what it
cannot)."""

from __future__ import annotations

import click
from flask import Flask
from flask.cli import AppGroup, with_appcontext
from sqlalchemy import select

from app.web import stapel
from stapel import model_dirs, mtcache
from stapel.admin import cancel_job, purge_jobs, requeue_job
from stapel.broker import send_callback
from stapel.exceptions import StapelError, ValidationError
from stapel.keys import create_key, revoke_key
from stapel.scores import set_tenant_min_score
from stapel.states import CallbackStatus
from stapel.tables import ApiKey, Tenant


def register(app: Flask) -> None:
    """Attach the command groups to the app."""
    app.cli.add_command(keys)
    app.cli.add_command(tenants)
    app.cli.add_command(jobs_group)
    app.cli.add_command(cache_group)
    app.cli.add_command(models_command)


def _session():
    return stapel().sessions()


keys = AppGroup("keys", help="Create, list and revoke API keys.")


@keys.command("create")
@click.option("--tenant", required=True, help="Tenant name; created if it does not exist.")
@click.option("--quiet", is_flag=True, help="Print only the key.")
def keys_create(tenant: str, quiet: bool) -> None:
    """Create a key for a tenant and print it once (only its hash is stored)."""
    with _session() as session:
        _, plain = create_key(session, tenant)
    if quiet:
        click.echo(plain)
    else:
        click.echo(
            f"tenant: {tenant}\nkey:    {plain}\n(stored hashed; it will not be shown again)"
        )


@keys.command("revoke")
@click.argument("prefix")
def keys_revoke(prefix: str) -> None:
    """Revoke the key that starts with PREFIX (its first 10 characters, as `keys list` shows)."""
    with _session() as session:
        count = revoke_key(session, prefix)
    click.echo(f"revoked {count} key(s)")
    if count == 0:
        raise SystemExit(1)


@keys.command("list")
def keys_list() -> None:
    """List keys: prefix, tenant, created, last used, revoked."""
    with _session() as session:
        rows = session.execute(
            select(ApiKey, Tenant.name)
            .join(Tenant, Tenant.id == ApiKey.tenant_id)
            .order_by(ApiKey.created_at)
        ).all()
    for key, tenant in rows:
        click.echo(
            f"{key.prefix}…  tenant={tenant} created={key.created_at:%Y-%m-%d %H:%M} "
            f"last_used={key.last_used_at or '-'} revoked={key.revoked_at or '-'}"
        )


tenants = AppGroup("tenants", help="Tenants: callback secrets, default min_score.")


@tenants.command("secret")
@click.argument("name")
def tenants_secret(name: str) -> None:
    """Print the secret that signs NAME's callbacks (HMAC-SHA256 of the body)."""
    with _session() as session:
        secret = session.scalar(select(Tenant.callback_secret).where(Tenant.name == name))
    if secret is None:
        raise click.ClickException(f"no tenant named {name!r}")
    click.echo(secret)


@tenants.command("min-score")
@click.argument("name")
@click.argument("value")
def tenants_min_score(name: str, value: str) -> None:
    """Set NAME's default min_score (0 to 1) for /v1 jobs that name none; `off` clears it."""
    try:
        score = None if value == "off" else float(value)
        with _session() as session:
            found = set_tenant_min_score(session, name, score)
    except (ValueError, ValidationError) as exc:
        raise click.ClickException(
            f"min_score must be a number from 0 to 1 or off: {exc}"
        ) from None
    if not found:
        raise click.ClickException(f"no tenant named {name!r}")
    click.echo(f"tenant={name} min_score={'off' if score is None else score}")


jobs_group = AppGroup("jobs", help="Requeue, cancel and purge any tenant's jobs.")


@jobs_group.command("requeue")
@click.argument("job_id")
def jobs_requeue(job_id: str) -> None:
    """Send a failed, cancelled or stuck job's unfinished chunks again."""
    ext = stapel()
    with ext.sessions() as session:
        try:
            done = requeue_job(session, ext.celery, ext.served.get(), job_id)
        except StapelError as exc:
            raise click.ClickException(exc.message) from None
    click.echo(
        f"requeued job {job_id}: {done.sent} of {done.chunks} chunk(s) sent"
        + ("" if done.sent == done.chunks else "; the watchdog sends the rest")
    )


@jobs_group.command("cancel")
@click.argument("job_id")
def jobs_cancel(job_id: str) -> None:
    """Cancel a queued or running job of any tenant."""
    ext = stapel()
    with ext.sessions() as session:
        try:
            job = cancel_job(session, job_id)
        except StapelError as exc:
            raise click.ClickException(exc.message) from None
        if job.callback_status == CallbackStatus.PENDING:
            send_callback(ext.celery, job.id)
    click.echo(f"cancelled job {job_id}")


@jobs_group.command("purge")
@click.option(
    "--older-than-days",
    type=click.FloatRange(min=0),
    required=True,
    help="Delete jobs that ended more than this many days ago.",
)
def jobs_purge(older_than_days: float) -> None:
    """Delete finished jobs (succeeded, failed, cancelled) and all their rows."""
    with _session() as session:
        count = purge_jobs(session, older_than_days)
    click.echo(f"purged {count} job(s)")


cache_group = AppGroup("cache", help="Purge the machine-translation cache.")


@cache_group.command("purge")
@click.option("--tenant", help="Delete this tenant's entries (by name).")
@click.option("--shared", is_flag=True, help="Delete the entries shared across tenants.")
@click.option("--expired", is_flag=True, help="Delete entries older than STAPEL_CACHE_TTL_S.")
def cache_purge(tenant: str | None, shared: bool, expired: bool) -> None:
    """Delete MT cache entries: a tenant's, the shared ones, or the expired ones."""
    if sum((tenant is not None, shared, expired)) != 1:
        raise click.UsageError("give exactly one of --tenant NAME, --shared, --expired")
    ext = stapel()
    with ext.sessions() as session:
        if expired:
            count = mtcache.purge_expired(session, ext.settings.cache_ttl_s)
            click.echo(f"purged {count} expired cache entries")
            return
        scope = mtcache.SHARED_SCOPE
        if tenant is not None:
            found = session.scalar(select(Tenant.id).where(Tenant.name == tenant))
            if found is None:
                raise click.ClickException(f"no tenant named {tenant!r}")
            scope = found
        count = mtcache.purge(session, scope)
    click.echo(f"purged {count} cache entries of {tenant or 'the shared scope'}")


@click.command("models")
@with_appcontext
def models_command() -> None:
    """List the models under STAPEL_MODEL_ROOT, and each folder that cannot be served."""
    root = stapel().settings.model_root
    found = model_dirs.models(root)
    for model in found:
        langs = model["languages"]
        shown = ", ".join(langs[:12]) + (f" (+{len(langs) - 12})" if len(langs) > 12 else "")
        click.echo(
            f"{model['model']}  family={model['family']}  pairs={model['pairs']}  "
            f"languages={shown}  path={model['path']}"
        )
    broken = {**model_dirs.problems(root), **model_dirs.unrecognised(root)}
    for entry, reason in sorted(broken.items()):
        click.echo(f"NOT SERVED {entry}: {reason}")
    if not found and not broken:
        click.echo(f"no models under {root}")
