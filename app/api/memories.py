"""Memory routes: import a TMX file, list, read, download as TMX, delete."""

from __future__ import annotations

from typing import IO

from flask import Response, g, jsonify, request, url_for

from app.api.blueprints import v1
from app.api.bodies import whole_or_stream
from app.api.parsing import offered_pairs
from app.web import db_session, stapel
from stapel import memories
from stapel.exceptions import TooLarge, UnknownLanguagePair, ValidationError
from stapel.formats import bilingual
from stapel.pivot import served
from stapel.tables import Memory


def memory_json(memory: Memory) -> dict:
    """Return the public representation of a memory."""
    return {
        "id": memory.id,
        "name": memory.name,
        "source_lang": memory.source_lang,
        "target_lang": memory.target_lang,
        "entries": memory.entries,
        "created_at": memory.created_at.isoformat() if memory.created_at else None,
        "links": {
            "self": url_for("v1.get_memory", memory_id=memory.id),
            "tmx": url_for("v1.download_memory", memory_id=memory.id),
        },
    }


class _Capped:
    """A request body that raises TooLarge past `limit` bytes (read as it streams)."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self.stream, self.limit, self.read_bytes = stream, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size if size and size > 0 else 65536)
        self.read_bytes += len(data)
        if self.read_bytes > self.limit:
            raise TooLarge(
                f"the TMX file is over {self.limit} bytes (STAPEL_MEMORY_MAX_BYTES)",
                code="memory_too_large",
            )
        return data


@v1.post("/memories")
def create_memory():
    """Import a TMX file as a memory for source_lang and target_lang (optional name).

    The TMX is the raw body (fields in the query), or a multipart form's `file` part
    (fields in the form or the query), as `curl -F file=@memory.tmx` sends it.
    """
    settings = stapel().settings
    limit = settings.memory_max_bytes
    if (request.content_length or 0) > limit:
        raise TooLarge(
            f"the TMX file is {request.content_length} bytes; the limit is {limit} bytes "
            "(STAPEL_MEMORY_MAX_BYTES)",
            code="memory_too_large",
        )
    fields, body = request.args, request.stream
    if request.mimetype == "multipart/form-data":
        fields = request.values  # the form's fields, then the query's
        upload = request.files.get("file")
        if upload is None:
            raise ValidationError(
                "a multipart upload needs the TMX file in a part named 'file'",
                code="missing_field",
            )
        body = upload.stream
    source, target = fields.get("source_lang"), fields.get("target_lang")
    if not source or not target:
        raise ValidationError(
            "give the memory's pair as source_lang and target_lang (in the query, or as "
            "form fields of a multipart upload)",
            code="missing_field",
        )
    pairs = served(settings.model_root, settings.pivot)
    if f"{source}-{target}" not in pairs:
        raise UnknownLanguagePair(
            f"no model for {source}-{target}; available pairs: {offered_pairs(pairs)}"
        )
    name = fields.get("name")
    if name is not None and (len(name) > 255 or "\x00" in name):
        raise ValidationError("name must be at most 255 characters", code="invalid_type")
    memory = memories.create(
        db_session(),
        g.tenant_id,
        _Capped(body, limit),
        (source, target),
        name=name,
        quota_entries=settings.memory_quota_entries,
    )
    response = jsonify(memory_json(memory))
    response.status_code = 201
    response.headers["Location"] = url_for("v1.get_memory", memory_id=memory.id)
    return response


@v1.get("/memories")
def list_memories():
    """List the tenant's memories, newest first."""
    return jsonify(
        {"memories": [memory_json(m) for m in memories.list_for(db_session(), g.tenant_id)]}
    )


@v1.get("/memories/<memory_id>")
def get_memory(memory_id: str):
    """Return one of the tenant's memories (404 for anyone else's)."""
    return jsonify(memory_json(memories.get(db_session(), g.tenant_id, memory_id)))


@v1.get("/memories/<memory_id>/tmx")
def download_memory(memory_id: str):
    """Send the memory back as TMX 1.4 (whole up to BUFFERED_ITEMS units, else streamed)."""
    session = db_session()
    memory = memories.get(session, g.tenant_id, memory_id)
    src, tgt, name, mid = memory.source_lang, memory.target_lang, memory.name, memory.id
    units = memory.entries
    session.rollback()
    documents = [(name, memories.iter_units(session, mid))]
    body = whole_or_stream(units, bilingual.tmx(documents, src, tgt))
    response = Response(body, mimetype="application/x-tmx+xml")
    response.headers.set("Content-Disposition", "attachment", filename=f"{mid}.tmx")
    return response


@v1.delete("/memories/<memory_id>")
def delete_memory(memory_id: str):
    """Delete the memory; jobs naming it afterwards get no matches from it."""
    memories.delete_memory(db_session(), g.tenant_id, memory_id)
    return "", 204
