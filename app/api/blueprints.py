"""The blueprints: /v1 (authenticated by API key) and the health probes."""

from __future__ import annotations

from flask import Blueprint, g, request

from app.web import db_session
from stapel.keys import tenant_for_header

v1 = Blueprint("v1", __name__, url_prefix="/v1")
health = Blueprint("health", __name__)


@v1.before_request
def _authenticate() -> None:
    g.tenant_id = tenant_for_header(db_session, request.headers.get("Authorization"))
