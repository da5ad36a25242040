"""Apps with security settings changed, on the suite's DB and Redis."""

from __future__ import annotations

import pytest

from app import create_app
from stapel.keys import create_key


@pytest.fixture
def make_app(engine, redis_client, settings_overrides):
    """Build apps with some settings changed; each comes with a key per tenant asked."""
    made = []

    def build(**changes):
        application = create_app({**settings_overrides, **changes})
        application.config["TESTING"] = True
        made.append(application)
        return application

    yield build
    for application in made:
        application.extensions["stapel"].dispose()


def key_for(application, tenant: str) -> dict:
    """Return an Authorization header with a new key of tenant."""
    with application.extensions["stapel"].sessions() as s:
        return {"Authorization": f"Bearer {create_key(s, tenant)[1]}"}
