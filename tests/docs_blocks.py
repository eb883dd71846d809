"""The fenced blocks of README.md and docs/*.md, and how CI runs each (tests/test_docs.py).

Every block is preceded by a marker line that says what CI does with it::

    <!-- ci: run -->                 run as written (bash; python blocks with the venv's Python), in
                                     order, in a scratch copy of the repository
    <!-- ci: stand-in TARGET -->     needs a server, a cluster or S3: TARGET, a test
                                     (``tests/file.py::test_name``) or a CI script, does it instead
    <!-- ci: config -->             a piece of conf/pipeline.yaml: it must validate
    <!-- ci: server-settings -->    the source server's my.cnf: a private MariaDB starts with it
    <!-- ci: output -->             what a command prints: not a command

Plain values, no I/O beyond reading the files: the test module does the running.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = ("run", "stand-in", "config", "server-settings", "output")

_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_MARKER = re.compile(r"^\s*<!--\s*ci:\s*(\S+)(?:\s+(.*?))?\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    doc: str          # path relative to the repository
    line: int         # 1-based line of the opening fence
    lang: str
    text: str         # the block's lines, its indentation removed
    kind: str | None  # the marker's kind, None when there is none
    arg: str          # the marker's argument ("" when none)

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def documents() -> list[Path]:
    """README.md first (its blocks make the warehouse later pages use), then docs/ by name."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        body = []
        i += 1
        while i < len(lines) and not re.match(rf"^{re.escape(indent)}```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.match(prev)
        found.append(Block(str(path.relative_to(REPO)), start + 1, lang, "\n".join(body) + "\n",
                           marker.group(1) if marker else None, (marker.group(2) or "") if marker else ""))
    return found


def all_blocks() -> list[Block]:
    return [b for doc in documents() for b in blocks_of(doc)]


def stand_in_exists(target: str) -> bool:
    """``tests/x.py::test_name`` names a test function in that file; otherwise a file of the repository."""
    path, _, name = target.partition("::")
    file = REPO / path
    if not file.is_file():
        return False
    return not name or re.search(rf"^def {re.escape(name)}\(", file.read_text(), re.MULTILINE) is not None


def ini_settings(text: str) -> dict[str, str]:
    """``key = value`` lines of an ini block (sections and comments left out)."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("[") and "=" in line:
            key, value = (s.strip() for s in line.split("=", 1))
            out[key] = value
    return out
