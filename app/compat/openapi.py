"""The compat dialects' entries in the OpenAPI document (app.api.openapi merges them).

Described as their own servers describe them, with each dialect's error shape; docs/compat.md
tells which clients to point where.
"""

from __future__ import annotations

LT, DL = "/libretranslate", "/deepl/v2"
LT_ERRORS = {
    400: "Bad input (a missing or unsupported parameter, format=html that is not well-formed)",
    403: "Missing or unknown api_key",
    404: "Unknown download link",
    413: "Body over STAPEL_MAX_BODY_BYTES",
    429: "Rate limit of the key, or a quota of the tenant (Retry-After)",
    503: "Database or queue unreachable (Retry-After)",
    504: "Not translated within STAPEL_INTERACTIVE_TIMEOUT_S (the jobs are cancelled)",
}
DL_ERRORS = {
    400: "Bad input (markup that is not well-formed, an unsupported option, formality more/less)",
    403: "Missing or unknown DeepL-Auth-Key",
    404: "Unknown document, wrong document_key, a result already downloaded, or a glossary "
    "that is not the key's tenant's (Glossary not found)",
    413: "Too many texts (STAPEL_INTERACTIVE_MAX_ITEMS), body over STAPEL_MAX_BODY_BYTES, or "
    "a glossary over STAPEL_GLOSSARY_MAX_ENTRIES",
    429: "Rate limit of the key, or jobs in flight (Retry-After)",
    456: "Segments or characters per day used up (Retry-After), or STAPEL_GLOSSARY_QUOTA "
    "glossaries held (no Retry-After)",
    503: "Document not ready, or database or queue unreachable (Retry-After)",
    504: "Not translated within STAPEL_INTERACTIVE_TIMEOUT_S (the jobs are cancelled)",
}
SCHEMAS = {
    "LibreTranslateError": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string"}},
    },
    "DeepLError": {
        "type": "object",
        "required": ["message"],
        "properties": {"message": {"type": "string"}},
    },
}
FORM = ("application/json", "application/x-www-form-urlencoded")


def _errors(errors: dict[int, str], schema: str, *statuses: int) -> dict:
    ref = {"$ref": f"#/components/schemas/{schema}"}
    return {
        str(s): {"description": errors[s], "content": {"application/json": {"schema": ref}}}
        for s in statuses
    }


def _ok(description: str, kind: str = "application/json") -> dict:
    schema = {"type": "string"} if kind.startswith("text/") else {}
    return {"200": {"description": description, "content": {kind: {"schema": schema}}}}


def _body(properties: dict, required: tuple[str, ...] = (), kinds=FORM) -> dict:
    schema = {"type": "object", "properties": properties, "required": list(required)}
    return {"content": {k: {"schema": schema} for k in kinds}}


def _lt(summary: str, ok: dict, *statuses: int, body: dict | None = None) -> dict:
    op = {
        "summary": summary,
        "tags": ["LibreTranslate"],
        "security": [],
        "responses": {**ok, **_errors(LT_ERRORS, "LibreTranslateError", *statuses)},
    }
    if body is not None:
        op["requestBody"] = body
    return op


def _dl(summary: str, ok: dict, *statuses: int, body: dict | None = None) -> dict:
    op = {
        "summary": summary,
        "tags": ["DeepL"],
        "security": [{"deepl": []}],
        "responses": {**ok, **_errors(DL_ERRORS, "DeepLError", 403, 429, 503, *statuses)},
    }
    if body is not None:
        op["requestBody"] = body
    return op


STR = {"type": "string"}
TEXTS = {"oneOf": [STR, {"type": "array", "items": STR}]}
LT_SUBMIT = (400, 403, 413, 429, 503, 504)
DOC = _body({"document_key": STR}, ("document_key",))


SECURITY = {
    "deepl": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`DeepL-Auth-Key <Stapel API key>`",
    }
}
"""LibreTranslate's key travels as the api_key parameter; DeepL's in this header."""


def extend(doc: dict) -> dict:
    """Add the dialects' paths, schemas and security scheme to the /v1 document."""
    doc["paths"].update(_libretranslate())
    doc["paths"].update(_deepl())
    doc["paths"].update(_deepl_glossaries())
    doc["components"]["schemas"].update(SCHEMAS)
    doc["components"]["securitySchemes"].update(SECURITY)
    return doc


def _libretranslate() -> dict:
    fmt = {"type": "string", "enum": ["text", "html"]}
    translate = {"q": TEXTS, "source": STR, "target": STR, "format": fmt, "api_key": STR}
    upload = {"file": {"type": "string", "format": "binary"}, **translate}
    upload.pop("q")
    return {
        f"{LT}/translate": {
            "post": _lt(
                "Translate q (a string or a list) from source (or auto) into target",
                _ok("translatedText, score (and detectedLanguage with auto)"),
                *LT_SUBMIT,
                body=_body(translate, ("q", "source", "target")),
            )
        },
        f"{LT}/languages": {
            m: _lt("The model root's languages and their targets", _ok("[{code, name, targets}]"))
            for m in ("get", "post")
        },
        f"{LT}/detect": {
            "post": _lt(
                "Rank the model root's languages for q",
                _ok("[{confidence, language}], best first"),
                400,
                403,
                413,
                429,
                503,
                body=_body({"q": STR, "api_key": STR}, ("q",)),
            )
        },
        f"{LT}/frontend/settings": {"get": _lt("Settings web clients read", _ok("Settings"))},
        f"{LT}/suggest": {"post": _lt("Suggestions: disabled on this server", {}, 403)},
        f"{LT}/translate_file": {
            "post": _lt(
                "Translate a document (.txt, XLIFF, SDLXLIFF, PO, SRT, HTML, DOCX); answers "
                "translatedFileUrl",
                _ok("{translatedFileUrl}"),
                *LT_SUBMIT,
                body=_body(upload, ("file", "source", "target"), ("multipart/form-data",)),
            )
        },
        f"{LT}/download_file/{{filename}}": {
            "get": {
                **_lt(
                    "A translated document in its own format (the link is its key)",
                    _ok("File", "application/octet-stream"),
                    404,
                    429,
                ),
                "parameters": [{"name": "filename", "in": "path", "required": True, "schema": STR}],
            }
        },
    }


def _deepl() -> dict:
    translate = {
        "text": TEXTS,
        "target_lang": STR,
        "source_lang": STR,
        "tag_handling": {"type": "string", "enum": ["xml", "html"]},
        "tag_handling_version": {"type": "string", "enum": ["v1", "v2"]},
        "ignore_tags": TEXTS,
        "splitting_tags": TEXTS,
        "non_splitting_tags": TEXTS,
        "outline_detection": {"oneOf": [{"type": "boolean"}, STR]},
        "glossary_id": STR,
        "model_type": {
            "type": "string",
            "enum": ["quality_optimized", "prefer_quality_optimized", "latency_optimized"],
        },
    }
    upload = {"file": {"type": "string", "format": "binary"}, "target_lang": STR}
    doc_id = [{"name": "document_id", "in": "path", "required": True, "schema": STR}]
    return {
        f"{DL}/translate": {
            "post": _dl(
                "Translate text into target_lang (glossary_id: the tenant's glossary of the "
                "pair, with source_lang)",
                _ok(
                    "{translations: [{detected_source_language, text, billed_characters, score, "
                    "model_type_used?}]}"
                ),
                400,
                404,
                413,
                456,
                504,
                body=_body(translate, ("text", "target_lang")),
            )
        },
        f"{DL}/languages": {
            m: _dl("Source or target languages (type)", _ok("[{language, name}]"), 400)
            for m in ("get", "post")
        },
        f"{DL}/usage": {
            m: _dl("Characters billed today and the limit", _ok("{character_count, ...}"))
            for m in ("get", "post")
        },
        f"{DL}/document": {
            "post": _dl(
                "Upload a document (.txt, XLIFF, SDLXLIFF, PO, SRT, HTML, DOCX) as a job",
                _ok("{document_id, document_key}"),
                400,
                413,
                456,
                body=_body(upload, ("file", "target_lang"), ("multipart/form-data",)),
            )
        },
        f"{DL}/document/{{document_id}}": {
            "post": {
                **_dl("A document's status", _ok("{status, ...}"), 400, 404, body=DOC),
                "parameters": doc_id,
            }
        },
        f"{DL}/document/{{document_id}}/result": {
            "post": {
                **_dl(
                    "A done document in its own format and media type, once",
                    _ok("The file", "application/octet-stream"),
                    400,
                    404,
                    body=DOC,
                ),
                "parameters": doc_id,
            }
        },
    }


def _deepl_glossaries() -> dict:
    make = {
        "name": STR,
        "source_lang": STR,
        "target_lang": STR,
        "entries": STR,
        "entries_format": {"type": "string", "enum": ["tsv", "csv"]},
    }
    info = "{glossary_id, name, ready, source_lang, target_lang, creation_time, entry_count}"
    one = [{"name": "glossary_id", "in": "path", "required": True, "schema": STR}]
    return {
        f"{DL}/glossary-language-pairs": {
            "get": _dl(
                "The pairs glossaries can be made for (the model root's)",
                _ok("{supported_languages: [{source_lang, target_lang}]}"),
            )
        },
        f"{DL}/glossaries": {
            "post": _dl(
                "Make a glossary from TSV or CSV entries",
                {"201": {"description": info, "content": {"application/json": {"schema": {}}}}},
                400,
                413,
                456,
                body=_body(make, ("name", "source_lang", "target_lang", "entries")),
            ),
            "get": _dl("The tenant's glossaries", _ok("{glossaries: [...]}")),
        },
        f"{DL}/glossaries/{{glossary_id}}": {
            "get": {**_dl("One glossary", _ok(info), 404), "parameters": one},
            "delete": {
                **_dl("Delete a glossary", {"204": {"description": "Deleted"}}, 404),
                "parameters": one,
            },
        },
        f"{DL}/glossaries/{{glossary_id}}/entries": {
            "get": {
                **_dl(
                    "A glossary's entries, one source<TAB>target a line",
                    _ok("TSV", "text/tab-separated-values"),
                    404,
                ),
                "parameters": one,
            }
        },
    }
