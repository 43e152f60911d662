"""The fenced code blocks of the README and the manual (docs/), as written, for the tests that run or check them
(tests/test_readme.py, tests/test_docs.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
HEADING = re.compile(r"^#+ (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class DocBlock:
    path: Path
    heading: str  # the last heading above the block, outside any block
    language: str  # the fence's word: bash, python, yaml, or "" for plain text
    code: str

    def where(self) -> str:
        return f"{self.path.relative_to(REPO)} ({self.heading})"


def doc_files() -> list[Path]:
    """README.md, then every page of the manual."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def blocks_of(path: Path) -> list[DocBlock]:
    text = path.read_text()
    out = []
    prose_end = 0
    heading = ""
    for found in FENCE.finditer(text):
        # Headings are read in the prose between blocks only: a `# comment` inside a block is not one.
        titles = HEADING.findall(text[prose_end : found.start()])
        heading = titles[-1] if titles else heading
        prose_end = found.end()
        out.append(DocBlock(path, heading, found[1], found[2]))
    return out


def blocks(language: str, files: list[Path] | None = None) -> list[DocBlock]:
    return [b for path in files or doc_files() for b in blocks_of(path) if b.language == language]


def section_block(path: Path, heading: str, language: str = "bash") -> str:
    """The first block of LANGUAGE under a heading of PATH that starts with HEADING."""
    found = [b.code for b in blocks(language, [path]) if b.heading.startswith(heading)]
    assert found, f"{path.name} has no {language} block under a heading starting {heading!r}"
    return found[0]
