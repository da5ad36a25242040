"""Plain text documents: what is not text on each line, kept to rebuild the file exactly.

A `.txt` upload is one segment per line. Its layout (a byte-order mark, and each line's
ending: LF, CRLF, CR or none on the last line) is stored as a small JSON record beside the
segments, so the translated file keeps the original's line endings, final newline or its
absence, and BOM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

BOM = "\ufeff"
ENDINGS = ("\n", "\r\n", "\r", "")


@dataclass
class Layout:
    """A text file's bytes outside its lines: a BOM and the line endings, run-length coded."""

    bom: bool = False
    runs: list[list] = field(default_factory=list)
    """[ending, count] pairs in file order."""

    def add(self, ending: str) -> None:
        """Record the next line's ending."""
        if self.runs and self.runs[-1][0] == ending:
            self.runs[-1][1] += 1
        else:
            self.runs.append([ending, 1])

    def to_bytes(self) -> bytes:
        return json.dumps({"bom": self.bom, "runs": self.runs}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Layout:
        value = json.loads(data)
        return cls(bool(value.get("bom")), [[e, int(n)] for e, n in value.get("runs", [])])


def ending(raw: bytes) -> str:
    """The line ending a raw line (as readline returns it) carries."""
    if raw.endswith(b"\r\n"):
        return "\r\n"
    if raw.endswith((b"\n", b"\r")):
        return raw[-1:].decode()
    return ""


def merge(layout: bytes, lines: list[str]) -> bytes:
    """Rebuild the file: each line with its own ending, the BOM if it had one."""
    found = Layout.from_bytes(layout)
    endings = [e for e, n in found.runs for _ in range(n)]
    endings += ["\n"] * (len(lines) - len(endings))
    out = [BOM] if found.bom else []
    out.extend(line + end for line, end in zip(lines, endings, strict=False))
    return "".join(out).encode()
