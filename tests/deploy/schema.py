"""Check a manifest against the Kubernetes API schema offline, with the client's models.

The official client has one model class per API type: `openapi_types` names each
attribute's type and `attribute_map` its JSON field. Walking an object with them finds
fields the API does not have (a typo kubectl would drop with a warning, or refuse) and
values of the wrong shape; building the model (`from_dict`) then checks required fields.
"""

from __future__ import annotations

import re

import kubernetes.client as k8s

LIST = re.compile(r"^[Ll]ist\[(.+)\]$")
DICT = re.compile(r"^[Dd]ict\[str, (.+)\]$")
PRIMITIVES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "bytes": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "datetime": (str,),
    "date": (str,),
    # IntOrString and free-form values (ports, maxUnavailable, CEL variables ...).
    "object": (str, int, float, bool, dict, list),
}
QUANTITIES = {
    ("V1ResourceRequirements", "limits"),
    ("V1ResourceRequirements", "requests"),
    ("V1VolumeResourceRequirements", "limits"),
    ("V1VolumeResourceRequirements", "requests"),
}
"""Quantity maps: the client types them Dict[str, str]; checked as quantities instead."""
QUANTITY = re.compile(r"^[+]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")


def model_name(obj: dict) -> str:
    """Return the client's class name for an object: apps/v1 Deployment -> V1Deployment."""
    version = obj["apiVersion"].rsplit("/", 1)[-1]
    return version[0].upper() + version[1:] + obj["kind"]


def errors(obj: dict) -> list[str]:
    """Return every schema error in a whole object (empty when it is valid)."""
    name = model_name(obj)
    if not hasattr(k8s, name):
        return [f"{obj.get('kind')}: no API type {name} in the kubernetes client"]
    found = check(obj, name, obj["kind"])
    if not found:
        try:
            getattr(k8s, name).from_dict(obj)
        except (ValueError, TypeError) as exc:
            found.append(f"{obj['kind']}: {exc}")
    return found


def check(value: object, type_name: str, path: str, quantity: bool = False) -> list[str]:
    """Return the errors of value against the client type named type_name."""
    if (match := LIST.match(type_name)) is not None:
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        return [e for i, item in enumerate(value) for e in check(item, match[1], f"{path}[{i}]")]
    if (match := DICT.match(type_name)) is not None:
        if not isinstance(value, dict):
            return [f"{path}: expected a map, got {type(value).__name__}"]
        if quantity:
            return [
                f"{path}.{key}: not a quantity: {item!r}"
                for key, item in value.items()
                if not QUANTITY.match(str(item))
            ]
        return [e for key, item in value.items() for e in check(item, match[1], f"{path}.{key}")]
    if type_name in PRIMITIVES:
        allowed = PRIMITIVES[type_name]
        if isinstance(value, bool) and bool not in allowed:
            return [f"{path}: expected {type_name}, got bool"]
        if isinstance(value, allowed):
            return []
        return [f"{path}: expected {type_name}, got {type(value).__name__}"]
    return check_model(value, type_name, path)


def check_model(value: object, type_name: str, path: str) -> list[str]:
    """Return the errors of a map against the model class type_name, field by field."""
    if not isinstance(value, dict):
        return [f"{path}: expected a {type_name} map, got {type(value).__name__}"]
    model = getattr(k8s, type_name)
    attribute = {json: attr for attr, json in model.attribute_map.items()}
    found = []
    for key, item in value.items():
        if key not in attribute:
            found.append(f"{path}.{key}: unknown field of {type_name}")
            continue
        name = attribute[key]
        is_quantity = (type_name, name) in QUANTITIES
        found += check(item, model.openapi_types[name], f"{path}.{key}", quantity=is_quantity)
    return found
