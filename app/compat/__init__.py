"""The compat dialects: LibreTranslate's API under /libretranslate/, DeepL's v2 under /deepl/.

Clients written for those servers (Weblate, Mastodon, libretranslatepy, the official
`deepl` client) point at Stapel and get its batching, priorities, quotas and scale:
their text requests run in the interactive lane (stapel.interactive), their documents as
jobs (stapel.compat_files). Each request counts against its tenant's rate limits, the
very windows /v1's requests count in (translations with submissions, everything else
with reads): every key of a tenant, whatever the dialect, shares one budget.
"""

from __future__ import annotations

from flask import Flask

from app.compat.deepl import dl
from app.compat.deepl_glossaries import gl
from app.compat.libretranslate import lt
from app.limits import OFF, rate_key

SUBMITS = (
    "libretranslate.translate",
    "libretranslate.translate_file",
    "deepl.translate",
    "deepl.upload_document",
)
"""Compat endpoints counted against the submission limit (they make jobs)."""


def register(app: Flask) -> None:
    """Register both dialects and put their routes under the key's rate limits.

    Call after init_limits: the limits share its limiter, scopes and keys (the tenant,
    app.limits.rate_key), so a tenant's compat translations and /v1 submissions count
    together.
    """
    app.register_blueprint(lt)
    app.register_blueprint(dl)
    app.register_blueprint(gl)
    settings = app.extensions["stapel"].settings
    limiter = app.extensions["stapel_limiter"]
    for endpoint, view in list(app.view_functions.items()):
        if endpoint.partition(".")[0] not in (lt.name, dl.name, gl.name):
            continue
        scope, value = (
            ("submit", settings.rate_submit)
            if endpoint in SUBMITS
            else ("read", settings.rate_read)
        )
        if value.strip().lower() not in OFF:
            app.view_functions[endpoint] = limiter.limited(view, value, scope, rate_key)
