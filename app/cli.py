"""Operator commands: `flask --app app keys create --tenant acme`, `keys revoke`, `keys list`."""

from __future__ import annotations

import click
from flask import Flask
from flask.cli import AppGroup
from sqlalchemy import select

from app.auth import create_key, revoke_key
from app.models import ApiKey, Tenant


def register(app: Flask) -> None:
    """Attach the command groups to the app."""
    app.cli.add_command(keys)
    app.cli.add_command(tenants)


def _session():
    from app.web import stapel

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
        click.echo(f"tenant: {tenant}\nkey:    {plain}\n"
                   "(stored hashed; it will not be shown again)")


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
            select(ApiKey, Tenant.name).join(Tenant, Tenant.id == ApiKey.tenant_id)
            .order_by(ApiKey.created_at)
        ).all()
    for key, tenant in rows:
        click.echo(
            f"{key.prefix}…  tenant={tenant} created={key.created_at:%Y-%m-%d %H:%M} "
            f"last_used={key.last_used_at or '-'} revoked={key.revoked_at or '-'}"
        )


tenants = AppGroup("tenants", help="Tenants and their callback secrets.")


@tenants.command("secret")
@click.argument("name")
def tenants_secret(name: str) -> None:
    """Print the secret that signs NAME's callbacks (HMAC-SHA256 of the body)."""
    with _session() as session:
        secret = session.scalar(select(Tenant.callback_secret).where(Tenant.name == name))
    if secret is None:
        raise click.ClickException(f"no tenant named {name!r}")
    click.echo(secret)
