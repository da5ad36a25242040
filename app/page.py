"""The page for the people who send work, at `/`: a template, one script, one stylesheet.

It is a client of /v1 like any other: the script sends the API key in the
Authorization header on each call and keeps it in the tab's sessionStorage only. No
cookie is ever set, so there is nothing for a cross-site request to ride on (no CSRF
surface), and the Content-Security-Policy allows scripts, styles and connections from
this origin only, with no inline code.
"""

from __future__ import annotations

from flask import Blueprint, Response, render_template, request

from app.api.parsing import PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN
from stapel.formats import EXTENSIONS

page = Blueprint("page", __name__)

CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self'",
        "form-action 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
"""The page's Content-Security-Policy: its own files and its own API, nothing inline."""
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@page.get("/")
def index():
    """Serve the page; everything it shows comes from /v1 with the key the user gives."""
    html = render_template(
        "index.html",
        accept=",".join(EXTENSIONS),
        extensions=", ".join(EXTENSIONS),
        priorities=range(PRIORITY_MAX, PRIORITY_MIN - 1, -1),
        priority_default=PRIORITY_DEFAULT,
    )
    return Response(html, mimetype="text/html", headers=SECURITY_HEADERS)


@page.after_app_request
def _static_headers(response: Response) -> Response:
    """Give the page's script and stylesheet the same policy and no sniffing."""
    if request.endpoint == "static":
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Content-Security-Policy", CSP)
    return response
