"""Read and patch the settings of a CTranslate2 model.bin without reconverting the model."""

from __future__ import annotations

import re
import struct
from pathlib import Path


def _variables(data: bytes) -> dict[str, tuple[int, int]]:
    """Map each variable of a CTranslate2 model.bin (binary version 6) to (offset, size)."""
    pos = 0

    def take(fmt: str) -> int:
        nonlocal pos
        (value,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return value

    def string() -> str:
        nonlocal pos
        length = take("H")
        text = data[pos : pos + length - 1].decode()
        pos += length
        return text

    if take("I") != 6:
        raise ValueError("only CTranslate2 binary version 6 is understood")
    string()  # spec name
    take("I")  # spec revision
    found = {}
    for _ in range(take("I")):
        name = string()
        for _ in range(take("B")):
            take("I")
        take("B")  # dtype
        size = take("I")
        found[name] = (pos, size)
        pos += size
    return found


def read_scalar(model_bin: Path, name: str) -> int:
    """Return an int16 scalar of a model.bin (decoder/num_heads, decoder/alignment_layer)."""
    data = model_bin.read_bytes()
    offset, _ = _variables(data)[name]
    return struct.unpack_from("h", data, offset)[0]


def decoder_layers(model_dir: Path) -> int:
    """Count the decoder layers of a converted model."""
    names = _variables((model_dir / "model.bin").read_bytes())
    return len({m.group(1) for n in names if (m := re.match(r"decoder/layer_(\d+)/", n))})


def set_alignment(model_dir: Path, layer: int, heads: int) -> None:
    """Rewrite which decoder layer and how many heads `return_attention` reports, in place.

    Only the two int16 settings change; every weight stays byte for byte, so
    translations stay the same (tests/training/test_committed_models.py).
    """
    path = Path(model_dir) / "model.bin"
    data = bytearray(path.read_bytes())
    found = _variables(bytes(data))
    layers = decoder_layers(Path(model_dir))
    if not (0 <= layer < layers and 1 <= heads <= read_scalar(path, "decoder/num_heads")):
        raise ValueError(f"no layer {layer} with {heads} heads in {path}")  # would crash ct2
    for name, value in (("decoder/alignment_layer", layer), ("decoder/alignment_heads", heads)):
        offset, size = found[name]
        if size != 2:
            raise ValueError(f"{name} is not an int16 in {path}")
        struct.pack_into("h", data, offset, value)
    path.write_bytes(bytes(data))
