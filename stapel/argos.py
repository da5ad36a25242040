"""Argos Translate packages, as Argos installs them (LibreTranslate's models).

An installed package is a folder (any name) with `metadata.json` (from_code, to_code,
from_name, to_name, optional target_prefix), `model/` (a CTranslate2 model) and
`sentencepiece.model`; point STAPEL_MODEL_ROOT at Argos's packages directory
(`~/.local/share/argos-translate/packages`). A `.argosmodel` file (the zip Argos
downloads) in the model root is unpacked once into UNPACK_DIR and served the same way.

Argos feeds a sentence's pieces without `</s>`, gives the target prefix when the
package has one, and turns `▁` and `_` into spaces after decoding (workers/families.py
does the same). Its codes are ISO 639-1 but for its own `zt` (Traditional Chinese) and
`pb` (Brazilian Portuguese).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SUFFIX = ".argosmodel"
CODES = {"zt": "zh_Hant", "pb": "pt_BR"}
"""Argos's own codes and the public codes they stand for."""

MAX_INPUT_TOKENS = 1024
"""OpenNMT-py conversions carry a 5,000-row position table that says nothing of what
the model was trained on; Argos never feeds more than CTranslate2's default
max_input_length (1,024), so neither does Stapel."""

UNPACK_DIR = Path(tempfile.gettempdir()) / "stapel-argos"
"""Where .argosmodel archives are unpacked (the temporary directory: the image's /tmp)."""


class PackageError(ValueError):
    """A package that cannot be served (the reason is the message)."""


@dataclass(frozen=True)
class Package:
    """One Argos package: its folder and what its metadata says."""

    path: Path
    source: str
    target: str
    source_name: str
    target_name: str
    target_prefix: str


def public(code: str) -> str:
    """Return the public code of an Argos code."""
    return CODES.get(code, code)


def is_package(path: Path) -> bool:
    """Whether path is an installed Argos package folder (metadata.json and model/)."""
    return (path / "metadata.json").is_file() and (path / "model").is_dir()


def read(path: Path) -> Package:
    """Return the installed package at path, or raise PackageError saying what is wrong."""
    try:
        meta = json.loads((path / "metadata.json").read_text())
    except (OSError, ValueError) as exc:
        raise PackageError(f"unreadable metadata.json: {exc}") from None
    if meta.get("type", "translate") != "translate":
        raise PackageError(f"a {meta.get('type')!r} package, not a translation model")
    source, target = meta.get("from_code"), meta.get("to_code")
    if not isinstance(source, str) or not isinstance(target, str):
        raise PackageError("metadata.json lacks from_code or to_code")
    if not (path / "model" / "model.bin").is_file():
        raise PackageError("no model/model.bin")
    if not (path / "sentencepiece.model").is_file():
        raise PackageError("no sentencepiece.model (BPE packages are not supported)")
    return Package(
        path,
        public(source),
        public(target),
        str(meta.get("from_name") or ""),
        str(meta.get("to_name") or ""),
        str(meta.get("target_prefix") or ""),
    )


def unpacked(archive: Path) -> Path:
    """Return the folder an .argosmodel archive is unpacked into (unpacking it once).

    The folder's name holds the archive's size and mtime, so a replaced archive is
    unpacked again; the unpacking goes to a temporary folder renamed into place, so a
    process never sees half of it.
    """
    stat = archive.stat()
    tag = hashlib.sha256(f"{archive.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    dest = UNPACK_DIR / f"{archive.stem}-{tag.hexdigest()[:12]}"
    if dest.is_dir():
        return _package_dir(dest)
    UNPACK_DIR.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=UNPACK_DIR, prefix=".unpacking-"))
    try:
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(work)
        try:
            work.rename(dest)
        except OSError:  # another process got there first
            shutil.rmtree(work, ignore_errors=True)
    except (OSError, zipfile.BadZipFile) as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise PackageError(f"cannot unpack {archive.name}: {exc}") from None
    log.info("argos package unpacked archive=%s into=%s", archive, dest)
    return _package_dir(dest)


def _package_dir(dest: Path) -> Path:
    """The package folder inside an unpacked archive (Argos zips hold one folder)."""
    if is_package(dest):
        return dest
    inner = [p for p in dest.iterdir() if p.is_dir() and is_package(p)]
    if len(inner) != 1:
        raise PackageError(f"{dest.name}: no package folder (metadata.json and model/)")
    return inner[0]


def candidates(root: Path) -> list[Path]:
    """Return the package folders and .argosmodel archives directly under root."""
    if not root.is_dir():
        return []
    return [
        entry
        for entry in sorted(root.iterdir())
        if (entry.is_file() and entry.name.endswith(SUFFIX))
        or (entry.is_dir() and is_package(entry))
    ]


def load(entry: Path) -> Package:
    """Return the package of a folder or an archive (unpacked), or raise PackageError."""
    return read(unpacked(entry) if entry.is_file() else entry)
