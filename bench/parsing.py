"""Reading documents: CPU seconds and peak memory per format and size, refused ones too.

    python -m bench.parsing            # prints a table, writes bench/runs/parsing.json
    python -m bench.parsing --quick    # the small sizes, one accepted and one refused each

Each case runs in a fresh process: it builds the upload and writes it to a temporary
file (where the web's multipart reader spools a file past 1 MiB), frees it, resets the
peak (Linux `clear_refs`), calls stapel.formats.parse_document on the file as the web
does, and reports the CPU seconds, the peak RSS above what it held before (the bytes
read once the document is accepted included), that figure over the body's size, and
the outcome (segments, or the 4xx). A "written back" case renders the accepted
document from its bytes with a target per segment, as a download does, instead.
docs/design/parsing.md shows the figures and the bounds they are held to.
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from bench.stamp import run_path, write_run

ROOT = Path(__file__).resolve().parent.parent
XLIFF_UNIT = b'<trans-unit id="u"><source>The old man sees the small dog.</source></trans-unit>\n'
W = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def html_paragraphs(n: int) -> bytes:
    return b"<p>a</p>" * n


def html_breaks(n: int) -> bytes:
    return b"<p>" + b"a<br>" * n + b"</p>"


def html_newlines(mib: int) -> bytes:
    return b"<p>a</p>" + b"\n" * (mib << 20)


def html_nested(n: int) -> bytes:
    return b"<p>" + b"<b>" * n + b"x" + b"</b>" * n + b"</p>"


def xliff(n: int) -> bytes:
    head = b'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body>'
    return head + XLIFF_UNIT * n + b"</body></file></xliff>"


def po(n: int) -> bytes:
    return b"".join(b'msgid "Entry %d"\nmsgstr ""\n\n' % i for i in range(n))


def srt(n: int) -> bytes:
    return b"".join(b"%d\n00:00:01,000 --> 00:00:02,000\nHello.\n\n" % i for i in range(1, n + 1))


def docx_of(document: bytes) -> bytes:
    """Return a .docx holding document as its word/document.xml."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", document)
    return out.getvalue()


def docx_paragraphs(n: int) -> bytes:
    para = b"<w:p><w:r><w:t>The old man sees %d small dogs.</w:t></w:r></w:p>"
    paras = b"".join(para % i for i in range(n))
    return docx_of(b"<w:document " + W + b"><w:body>" + paras + b"</w:body></w:document>")


def docx_zeros(mib: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b"<w:document " + W + b"/>")
        with z.open("word/media/zeros.bin", "w") as member:
            for _ in range(mib):
                member.write(bytes(1 << 20))
    return out.getvalue()


OVER = [10_000, 250_000]
"""Quick sizes: one accepted, one just past the default segment limit (200,000)."""
CASES = {
    # name: (file name, builder, quick sizes, full sizes)
    "html <p>a</p>": ("a.html", html_paragraphs, OVER, [100_000, 1_000_000, 4_000_000]),
    "html <br> in one <p>": ("a.html", html_breaks, [20_000], [20_000, 200_000]),
    "html nested <b>": ("a.html", html_nested, [20_000], [100_000]),
    "html newlines (MiB)": ("a.html", html_newlines, [4], [30]),
    "xliff units": ("a.xlf", xliff, OVER, [100_000, 750_000]),
    "po entries": ("a.po", po, OVER, [100_000, 1_000_000]),
    "po entries, written back": ("a.po", po, [10_000], [100_000]),
    "srt cues": ("a.srt", srt, OVER, [100_000, 1_000_000]),
    "docx paragraphs": ("a.docx", docx_paragraphs, OVER, [100_000, 1_000_000]),
    "docx zero-filled entry (MiB)": ("a.docx", docx_zeros, [50], [250]),
}
WRITTEN = {"po entries, written back"}
"""Cases that render the document with a target per segment (a download) instead."""


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def one(case: str, size: int) -> dict:
    """Run one case in this process; return its figures."""
    from stapel.exceptions import StapelError
    from stapel.formats import Limits, Options, parse_document, render_document

    name, build, _quick, _full = CASES[case]
    data = build(size)
    body = len(data)
    targets: list[str | None] = []
    if case in WRITTEN:
        targets = [f"X {s}" for s in parse_document(name, data, Limits()).segments]
    file = tempfile.TemporaryFile()
    file.write(data)
    if case not in WRITTEN:
        del data
    Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from here
    before = peak_kib()
    cpu = time.process_time()
    try:
        if case in WRITTEN:
            out = render_document("po", data, targets, Options(), ("en", "de"))
            outcome = f"{len(out) / 2**20:.2f} MiB written"
        else:
            outcome = f"{len(parse_document(name, file, Limits()).segments)} segments"
    except StapelError as exc:
        outcome = f"{exc.status} {exc.code}"
    cpu = time.process_time() - cpu
    above = (peak_kib() - before) / 1024
    return {
        "case": case,
        "size": size,
        "body_mib": round(body / 2**20, 2),
        "cpu_s": round(cpu, 3),
        "peak_above_idle_mib": round(above, 1),
        "peak_over_body": round(above / max(body / 2**20, 0.01), 1),
        "outcome": outcome,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one", nargs=2, metavar=("CASE", "SIZE"))
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]))))
        return
    rows = []
    for case, (_name, _build, quick, full) in CASES.items():
        for size in quick if args.quick else full:
            cmd = [sys.executable, "-m", "bench.parsing", "--one", case, str(size)]
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
            rows.append(json.loads(done.stdout))
            print(
                "{case:30} {size:>9} {body_mib:>8} MiB {cpu_s:>8} s {peak_above_idle_mib:>8} MiB"
                " {peak_over_body:>6}x  {outcome}".format(**rows[-1]),
                flush=True,
            )
    if not args.quick:
        print(f"wrote {write_run(run_path('parsing'), {'rows': rows})}")


if __name__ == "__main__":
    main()
