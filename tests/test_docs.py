"""The README and docs/ say what is true: links resolve, commands name what exists.

Each check reads the Markdown as a reader would follow it: a relative link must reach a
file (and a heading, when it names one), every docs page must be reachable from the
index by links, each `make` target named must be in the Makefile, each curl call must
reach a route of the app with its method, each `flask --app app` command must exist,
each path in backticks must be in the repository, and every setting must be in the
configuration table.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from werkzeug.exceptions import MethodNotAllowed, NotFound

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
INDEX = ROOT / "docs" / "README.md"
FRONT = [README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md"]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
ALL = FRONT + PAGES
OWN = FRONT + [
    ROOT / "docs" / name
    for name in (
        "README.md",
        "api.md",
        "architecture.md",
        "compat.md",
        "configuration.md",
        "dependencies.md",
        "models.md",
        "operations.md",
        "page.md",
    )
]
"""The pages whose every command and path is checked (the others carry measurements)."""

README_MAX_LINES = 250
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```")
TOP_FOLDERS = (
    "app/",
    "autoscaler/",
    "bench/",
    "bin/",
    "deploy/",
    "docs/",
    "migrations/",
    "models/",
    "stapel/",
    "stapel_cli/",
    "tests/",
    "training/",
    "workers/",
)


def prose(path: Path) -> str:
    """Return the file's text outside code fences."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return "\n".join(lines)


def code_blocks(path: Path) -> list[str]:
    """Return the text of each fenced block of the file."""
    blocks, current = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            if current is None:
                current = []
            else:
                blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def slug(heading: str) -> str:
    """Return GitHub's anchor for a heading."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Return the anchors of the file's headings, numbered as GitHub numbers repeats."""
    found: set[str] = set()
    for line in prose(path).splitlines():
        match = re.match(r"^#{1,6} (.+)$", line)
        if match:
            base, n = slug(match.group(1)), 0
            name = base
            while name in found:
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def links(path: Path) -> list[str]:
    """Return the relative link targets of the file (web links left out)."""
    return [target for target in LINK.findall(prose(path)) if not re.match(r"^[a-z]+:", target)]


def test_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; reference goes to docs/"


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    broken = []
    for target in links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{path.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_docs_page_is_reachable_from_the_index():
    seen, todo = {INDEX.resolve()}, [INDEX]
    while todo:
        page = todo.pop()
        for target in links(page):
            dest = (page.parent / target.partition("#")[0]).resolve()
            inside = dest.suffix == ".md" and dest.is_relative_to(ROOT / "docs")
            if inside and dest.exists() and dest not in seen:
                seen.add(dest)
                todo.append(dest)
    missing = [str(p.relative_to(ROOT)) for p in PAGES if p.resolve() not in seen]
    assert not missing, f"no path of links from docs/README.md reaches {missing}"


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.MULTILINE))


@pytest.mark.parametrize("path", OWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_make_target_named_exists(path):
    text = path.read_text(encoding="utf-8")
    named = set(re.findall(r"(?:^|[`\s])make ([a-z][\w-]*)", text, re.MULTILINE))
    if path == README:
        assert {"run", "test"} <= named, "the README shows the two commands"
    missing = named - make_targets()
    assert not missing, f"{path.relative_to(ROOT)} names make targets {missing}"


def curl_calls(path: Path) -> list[tuple[str, str]]:
    """Return (method, URL) of each curl command in the file's code blocks."""
    calls = []
    for block in code_blocks(path):
        if "curl " not in block:
            continue
        words = shlex.split(block, comments=True)
        starts = [i for i, word in enumerate(words) if word == "curl"]
        for start, end in zip(starts, [*starts[1:], len(words)], strict=True):
            command = words[start:end]
            if "|" in command:
                command = command[: command.index("|")]
            url = next(w for w in command if w.startswith("http://127.0.0.1:8000"))
            method = command[command.index("-X") + 1] if "-X" in command else None
            sends = any(w in command for w in ("-d", "-F", "--data-binary", "--data-urlencode"))
            calls.append((method or ("POST" if sends else "GET"), url))
    return calls


@pytest.mark.parametrize("path", OWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_curl_call_reaches_a_route(app, path):
    adapter = app.url_map.bind("127.0.0.1:8000")
    wrong = []
    for method, url in curl_calls(path):
        route = url.removeprefix("http://127.0.0.1:8000").split("?")[0]
        route = re.sub(r"\$\{?(\w+)\}?", "x", route)
        try:
            adapter.match(route, method=method)
        except (NotFound, MethodNotAllowed):
            wrong.append(f"{method} {route}")
    assert not wrong, f"{path.relative_to(ROOT)}: no such route: {wrong}"


def test_the_readme_shows_a_first_job():
    assert ("POST", "http://127.0.0.1:8000/v1/jobs") in curl_calls(README)


@pytest.mark.parametrize("path", OWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_flask_command_exists(app, path):
    missing = []
    for group, command in re.findall(
        r"flask --app app ([a-z][a-z-]*) ([a-z][a-z-]*)", path.read_text(encoding="utf-8")
    ):
        found = app.cli.get_command(None, group)
        if found is None or command not in found.commands:
            missing.append(f"{group} {command}")
    assert not missing, f"{path.relative_to(ROOT)}: no flask command {missing}"


@pytest.mark.parametrize("path", OWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_in_backticks_exists(path):
    generated = {"deploy/base/secrets/stapel.env"}  # written by deploy/make_secrets.py
    missing = []
    for token in re.findall(r"`([^`\s]+)`", path.read_text(encoding="utf-8")):
        name = token.split("::")[0].rstrip(".,:;")
        if not name.startswith(TOP_FOLDERS) or re.search(r"[<>*{}$]|\.\.\.", name):
            continue
        if name not in generated and not (ROOT / name).exists():
            missing.append(name)
    assert not missing, f"{path.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_every_setting_is_in_the_configuration_table():
    settings = (ROOT / "stapel" / "settings.py").read_text(encoding="utf-8")
    names = set(re.findall(r'setting\(\s*"([A-Z_]+)"', settings))
    table = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = sorted(name for name in names if f"`{name}`" not in table)
    assert names and not missing, f"docs/configuration.md lacks {missing}"
