"""The DeepL v2 dialect's glossaries, under /deepl/v2/glossaries (stapel.glossaries).

A glossary is made for a pair the model root serves, from TSV or CSV entries, and
answered as DeepL describes one: languages lower-case without a region, `ready` at once.
Another tenant's glossary is 404 "Glossary not found", as an unknown one is.
"""

from __future__ import annotations

from datetime import datetime, timezone

from flask import Blueprint, Response, g, jsonify

from app.compat.deepl import DIALECT, authenticate_deepl, required
from app.compat.errors import install
from app.compat.languages import deepl_source, resolve
from app.compat.params import params
from app.compat.shared import models
from app.web import db_session, stapel
from stapel import glossaries
from stapel.exceptions import ValidationError
from stapel.tables import Glossary

gl = Blueprint("deepl_glossaries", __name__, url_prefix="/deepl")
install(gl, DIALECT)
gl.before_request(authenticate_deepl)


def _iso(moment: datetime) -> str:
    """A time as DeepL writes it: UTC, milliseconds, `Z`."""
    at = moment.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    return at.replace("+00:00", "Z")


def glossary_json(glossary: Glossary) -> dict:
    """Return a glossary as DeepL describes one (languages lower-case, no region)."""
    return {
        "glossary_id": glossary.id,
        "name": glossary.name,
        "ready": True,
        "source_lang": deepl_source(glossary.source_lang).lower(),
        "target_lang": deepl_source(glossary.target_lang).lower(),
        "creation_time": _iso(glossary.created_at),
        "entry_count": glossary.entry_count,
    }


@gl.get("/v2/glossary-language-pairs")
def glossary_language_pairs():
    """List the pairs glossaries can be made for: the model root's, without regions."""
    pairs = dict.fromkeys(
        (deepl_source(s).lower(), deepl_source(t).lower()) for s, t in models().pairs
    )
    return jsonify(
        {"supported_languages": [{"source_lang": s, "target_lang": t} for s, t in pairs]}
    )


@gl.post("/v2/glossaries")
def create_glossary():
    """Make a glossary from TSV or CSV entries for a pair the model root serves."""
    name = required("name")
    source, target = required("source_lang"), required("target_lang")
    entries = required("entries")
    fmt = (params().text("entries_format") or "tsv").lower()
    found = models()
    source_code, target_code = resolve(source, found.sources), resolve(target, found.targets)
    if source_code is None or target_code is None or (source_code, target_code) not in found.pairs:
        raise ValidationError(
            "Unsupported glossary source and target language pair: no model translates "
            f"{source} to {target}",
            code="unknown_language_pair",
        )
    settings = stapel().settings
    glossary = glossaries.create(
        db_session(),
        g.tenant_id,
        name,
        (source_code, target_code),
        glossaries.parse_entries(entries, fmt, (source, target)),
        max_entries=settings.glossary_max_entries,
        quota=settings.glossary_quota,
    )
    response = jsonify(glossary_json(glossary))
    response.status_code = 201
    return response


@gl.get("/v2/glossaries")
def list_glossaries():
    """List the tenant's glossaries, oldest first."""
    found = glossaries.list_for(db_session(), g.tenant_id)
    return jsonify({"glossaries": [glossary_json(x) for x in found]})


@gl.get("/v2/glossaries/<glossary_id>")
def get_glossary(glossary_id: str):
    """Describe one of the tenant's glossaries (404 for anyone else's)."""
    return jsonify(glossary_json(glossaries.get(db_session(), g.tenant_id, glossary_id)))


@gl.get("/v2/glossaries/<glossary_id>/entries")
def glossary_entries(glossary_id: str):
    """Return a glossary's entries as TSV, one `source<TAB>target` a line."""
    session = db_session()
    found = glossaries.entries(session, glossaries.get(session, g.tenant_id, glossary_id))
    return Response(glossaries.to_tsv(found), mimetype="text/tab-separated-values")


@gl.delete("/v2/glossaries/<glossary_id>")
def delete_glossary(glossary_id: str):
    """Delete one of the tenant's glossaries and its entries."""
    glossaries.delete_glossary(db_session(), g.tenant_id, glossary_id)
    return "", 204
