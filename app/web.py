"""Per-request access to what create_app set up: settings, DB session, Celery client."""

from __future__ import annotations

from dataclasses import dataclass

from celery import Celery
from flask import current_app, g
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings


@dataclass
class Stapel:
    """The extension object stored in app.extensions["stapel"]."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    celery: Celery


def stapel() -> Stapel:
    """Return the current app's Stapel extension."""
    return current_app.extensions["stapel"]


def db_session() -> Session:
    """Return this request's session, opened on first use and closed at teardown."""
    if "db" not in g:
        g.db = stapel().sessions()
    return g.db


def close_session(_exc: BaseException | None = None) -> None:
    """Close the request's session if one was opened."""
    session = g.pop("db", None)
    if session is not None:
        session.close()
