"""Reading a CTranslate2 model.bin: its position tables, and the input limit they make.

Each model's input limit in tokens comes from the model itself: the length of its
encoder's position table in model.bin (a converted OPUS-MT model has 512, the demo
models 256), else `max_input_tokens` in its config.json, else DEFAULT_INPUT_TOKENS.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

DEFAULT_INPUT_TOKENS = 512
"""The input limit of a model that states none (no position table: CTranslate2 makes
sinusoids for any length, but models are trained on sentences; 512 is OPUS-MT's)."""

MADE_UP_ROWS = frozenset({2048, 5000})
"""Position tables converters make up rather than copy: CTranslate2's Marian converter
(`ct2-opus-mt-converter`) writes 2,048 sinusoid rows, OpenNMT-py keeps its 5,000-row
default. Their length says nothing of what the model was trained on (OPUS-MT: 512), so
such a table counts as none and never raises the input limit."""

ENCODER_POSITIONS = "encoder/position_encodings/encodings"
DECODER_POSITIONS = "decoder/position_encodings/encodings"


class ModelFileError(ValueError):
    """model.bin cannot be read as a CTranslate2 model."""


@dataclass(frozen=True)
class Limits:
    """The longest input and output a model takes, in tokens (None: no table)."""

    input_tokens: int
    decoder_positions: int | None


def limits(path: Path, stated: int | None = None) -> Limits:
    """Return the input limit and decoder table length of the model directory path.

    `stated` (a manifest's max_input_tokens) lowers the limit, never raises it past the
    model's position table.
    """
    tables = position_tables(path / "model.bin")
    encoder = tables.get(ENCODER_POSITIONS)
    if encoder in MADE_UP_ROWS:
        encoder = None
    if stated:
        encoder = min(encoder, stated) if encoder else stated
    if encoder is None:
        try:
            config = json.loads((path / "config.json").read_text())
        except (OSError, ValueError):
            config = {}
        stated = config.get("max_input_tokens") if isinstance(config, dict) else None
        encoder = stated if isinstance(stated, int) and stated > 0 else DEFAULT_INPUT_TOKENS
    return Limits(encoder, tables.get(DECODER_POSITIONS))


def position_tables(model_bin: Path) -> dict[str, int]:
    """Return the position tables' lengths in a CTranslate2 model.bin, by variable name.

    Reads only the header of each variable and seeks over its data (the layout written
    by `ctranslate2.specs.ModelSpec._serialize`); aliases (an encoder sharing the
    decoder's table) resolve to their target's length.
    """
    lengths: dict[str, int] = {}
    with model_bin.open("rb") as f:
        _unpack(f, "I")  # binary version
        _string(f)  # spec name
        _unpack(f, "I")  # revision
        (count,) = _unpack(f, "I")
        for _ in range(count):
            name = _string(f)
            (rank,) = _unpack(f, "B")
            shape = _unpack(f, f"{rank}I")
            _unpack(f, "B")  # dtype
            (size,) = _unpack(f, "I")
            f.seek(size, 1)
            if name.endswith("position_encodings/encodings") and shape:
                lengths[name] = shape[0]
        (aliases,) = _unpack(f, "I")
        for _ in range(aliases):
            alias, target = _string(f), _string(f)
            if target in lengths:
                lengths[alias] = lengths[target]
    return lengths


def _unpack(f: BinaryIO, fmt: str) -> tuple:
    size = struct.calcsize(fmt)
    raw = f.read(size)
    if len(raw) != size:
        raise ModelFileError("truncated")
    return struct.unpack(fmt, raw)


def _string(f: BinaryIO) -> str:
    (length,) = _unpack(f, "H")
    raw = f.read(length)
    if len(raw) != length or not length:
        raise ModelFileError("truncated")
    try:
        return raw[:-1].decode("utf-8")
    except UnicodeDecodeError:
        raise ModelFileError("not a CTranslate2 model") from None
