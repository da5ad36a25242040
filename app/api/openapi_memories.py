"""The OpenAPI paths and schemas of translation memories (app/api/memories.py)."""

from __future__ import annotations

from collections.abc import Callable

MEMORY = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "name": {"type": "string", "nullable": True},
        "source_lang": {"type": "string"},
        "target_lang": {"type": "string"},
        "entries": {"type": "integer", "description": "Translation units stored"},
        "created_at": {"type": "string", "format": "date-time"},
        "links": {
            "type": "object",
            "properties": {k: {"type": "string"} for k in ("self", "tmx")},
        },
    },
}
MEMORY_ID = {
    "name": "memory_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "format": "uuid"},
}
TMX = {"application/x-tmx+xml": {"schema": {"type": "string", "format": "binary"}}}
TMX_FORM = {
    "multipart/form-data": {
        "schema": {
            "type": "object",
            "required": ["file"],
            "properties": {
                "file": {"type": "string", "format": "binary", "description": "The TMX file"},
                "source_lang": {"type": "string"},
                "target_lang": {"type": "string"},
                "name": {"type": "string", "maxLength": 255},
            },
        }
    }
}


def paths(op: Callable[..., dict], json: Callable, errors: Callable) -> dict:
    """Return the /v1/memories paths, built with openapi.py's helpers."""
    pair = [
        {
            "name": n,
            "in": "query",
            "schema": {"type": "string"},
            "description": "Required here, or as a field of a multipart upload",
        }
        for n in ("source_lang", "target_lang")
    ] + [{"name": "name", "in": "query", "schema": {"type": "string", "maxLength": 255}}]
    return {
        "/v1/memories": {
            "post": op(
                "Import a TMX file (the body, or a multipart form's `file` part) as a "
                "translation memory of the pair",
                {
                    "201": json("Memory", "The memory, with its units counted"),
                    **errors(400, 413),
                },
                parameters=pair,
                requestBody={"required": True, "content": {**TMX, **TMX_FORM}},
                description="A malformed TMX is 400 `invalid_tmx` naming the line and "
                "column; a unit without both languages, or a header srclang of another "
                "language, is 400 too. The body is limited by STAPEL_MEMORY_MAX_BYTES "
                "(413 `memory_too_large`); a tenant's memories hold at most "
                "STAPEL_MEMORY_QUOTA_ENTRIES units (429 `memory_quota_exceeded`).",
            ),
            "get": op(
                "The tenant's memories, newest first",
                {
                    "200": json(
                        {
                            "type": "object",
                            "properties": {
                                "memories": {
                                    "type": "array",
                                    "items": {"$ref": "#/components/schemas/Memory"},
                                }
                            },
                        },
                        "The memories",
                    )
                },
            ),
        },
        "/v1/memories/{memory_id}": {
            "get": op(
                "One memory",
                {"200": json("Memory", "The memory"), **errors(404)},
                parameters=[MEMORY_ID],
            ),
            "delete": op(
                "Delete a memory and its units",
                {"204": {"description": "Deleted"}, **errors(404)},
                parameters=[MEMORY_ID],
            ),
        },
        "/v1/memories/{memory_id}/tmx": {
            "get": op(
                "The memory as TMX 1.4",
                {"200": {"description": "TMX", "content": TMX}, **errors(404)},
                parameters=[MEMORY_ID],
            )
        },
    }
