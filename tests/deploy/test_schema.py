"""Every object the overlays render fits the Kubernetes API schema (checked offline)."""

from __future__ import annotations

import copy

import pytest

from tests.deploy.render import OVERLAYS, by_key, rendered
from tests.deploy.schema import errors


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_fits_the_api_schema(overlay):
    objects = rendered(overlay)
    assert len(objects) > 20
    problems = {f"{o['kind']}/{o['metadata']['name']}": errors(o) for o in objects}
    assert {name: found for name, found in problems.items() if found} == {}


def _container(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]["containers"][0]


MISTAKES = [
    ("unknown field", lambda d: _container(d).update(securityContxt={}), "unknown field"),
    ("unknown top-level field", lambda d: d["spec"].update(replica=2), "unknown field"),
    ("string for an int", lambda d: d["spec"].update(replicas="2"), "expected int"),
    ("map for a list", lambda d: _container(d).update(ports={"http": 8000}), "expected a list"),
    ("int for a string", lambda d: _container(d)["env"].append({"name": "X", "value": 1}), "str"),
    (
        "bad quantity",
        lambda d: _container(d)["resources"]["limits"].update(memory="2GB"),
        "quantity",
    ),
    ("bool for a string", lambda d: _container(d).update(image=True), "expected str"),
    ("missing required name", lambda d: _container(d).pop("name"), "name"),
]


@pytest.mark.parametrize(
    "mutate, expected", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES]
)
def test_the_check_finds_mistakes_the_api_would_refuse(mutate, expected):
    web = copy.deepcopy(by_key(rendered("small"))[("Deployment", "stapel-web")])
    assert errors(web) == []
    mutate(web)
    found = errors(web)
    assert found and any(expected in e for e in found), found
