"""A rewritten XML file given back the original's spelling wherever its content is the same.

lxml writes a tree in its own spelling: namespace declarations first, `<x/>` for
`<x />`, double quotes, characters for character references. `restore` matches the
rewritten file and the original token by token (tags, text, comments, processing
instructions) and, where a token means the same as the original's at that place, puts
the original's bytes back; tokens that differ (a written target, an added attribute)
stay as lxml wrote them. The result is checked to be the same XML as the rewritten
file (canonical form), else the rewritten file is returned as it was.
"""

from __future__ import annotations

import difflib
import html
import re

from lxml import etree

TOKEN = re.compile(
    r"<!--.*?-->|<\?.*?\?>|<!\[CDATA\[.*?\]\]>|<!DOCTYPE[^>]*>"
    r"|</?[^\s/>!?]+(?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*\s*/?>|[^<]+",
    re.DOTALL,
)
ATTRIBUTE = re.compile(r"([^\s=/>]+)\s*=\s*(\"[^\"]*\"|'[^']*')")
DECLARED = re.compile(rb"^(?:\xef\xbb\xbf)?\s*<\?xml[^>]*encoding=[\"']([A-Za-z0-9._-]+)[\"']")
WINDOW = 300
"""Tokens matched at a time (matching costs the square of the window's length)."""


def _key(token: str) -> tuple:
    """What a token means: its kind, name and attributes, or its text (references read)."""
    if token.startswith("</"):
        return ("end", token[2:-1].strip())
    if token.startswith(("<!--", "<?", "<![CDATA[", "<!DOCTYPE")):
        return ("other", token)
    if token.startswith("<"):
        name = re.match(r"<([^\s/>]+)", token)
        attrs = tuple(sorted((n, html.unescape(v[1:-1])) for n, v in ATTRIBUTE.findall(token)))
        kind = "empty" if token.rstrip(">").rstrip().endswith("/") else "start"
        return (kind, name.group(1) if name else "", attrs)
    return ("text", html.unescape(token))


def restore(original: bytes, rewritten: bytes) -> bytes:
    """Return rewritten with the original's bytes wherever a token means the same."""
    found = DECLARED.match(original)
    encoding = found.group(1).decode() if found else "utf-8"
    try:
        old = original.decode(encoding).lstrip("\ufeff")
        new = rewritten.decode(encoding).lstrip("\ufeff")
        out = _merge(TOKEN.findall(old), TOKEN.findall(new)).encode(encoding)
        if not _same(out, rewritten):
            return rewritten
    except (LookupError, UnicodeError, etree.XMLSyntaxError, ValueError):
        return rewritten
    return (b"\xef\xbb\xbf" if rewritten.startswith(b"\xef\xbb\xbf") else b"") + out


def _merge(old: list[str], new: list[str]) -> str:
    """The new tokens, each replaced by the original's where a run of them matches.

    Matched a window at a time (matching whole lists grows with the square of their
    length): each window's matches are taken up to the last one well inside it, and
    the next window starts there.
    """
    old_keys, new_keys = [_key(t) for t in old], [_key(t) for t in new]
    out: list[str] = []
    i = j = 0
    while j < len(new):
        a, b = old_keys[i : i + WINDOW], new_keys[j : j + WINDOW]
        ops = difflib.SequenceMatcher(None, a, b).get_opcodes()
        final = i + WINDOW >= len(old) and j + WINDOW >= len(new)
        equal = [k for k, op in enumerate(ops) if op[0] == "equal"]
        inside = [k for k in equal if ops[k][2] <= len(a) * 3 // 4 and ops[k][4] <= len(b) * 3 // 4]
        if not equal:  # nothing in common here: lxml's spelling
            out.extend(new[j : j + WINDOW])
            j += WINDOW
            continue
        upto = len(ops) - 1 if final else (inside or equal)[-1]
        for tag, i1, i2, j1, j2 in ops[: upto + 1]:
            out.extend(old[i + i1 : i + i2] if tag == "equal" else new[j + j1 : j + j2])
        i, j = i + ops[upto][2], j + ops[upto][4]
    return "".join(out)


def _same(a: bytes, b: bytes) -> bool:
    """Whether two XML files hold the same tree (names, attributes, text, in order)."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    one, two = etree.fromstring(a, parser), etree.fromstring(b, parser)
    left, right = list(one.iter()), list(two.iter())
    return len(left) == len(right) and all(
        (x.tag, sorted(x.attrib.items()), x.text, x.tail)
        == (y.tag, sorted(y.attrib.items()), y.text, y.tail)
        for x, y in zip(left, right, strict=True)
    )
