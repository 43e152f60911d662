"""What comments and docstrings of slurmgen and of the tests point to exists: a reader who follows a file path
(`slurmgen/<package>/<module>.py`, `tests/<file>.py`, `spec/fields.py`) or a dotted name
(`slurmgen.<module>.<name>`) finds that file, module or name, not one that was moved or renamed since. Paths
outside the project (torch/distributed/..., lightning/...) are not checked."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import cache
from pathlib import Path

from recorded import REPO

PACKAGE = REPO / "slurmgen"
# A file path of ours: from the repository's top (slurmgen/, tests/, templates/) or from slurmgen/ (spec/fields.py).
OURS = ("slurmgen", "tests", "templates", *sorted(p.name for p in PACKAGE.iterdir() if p.is_dir()))
PATH = re.compile(rf"(?<![\w/.*-])(?:{'|'.join(OURS)})/[\w/]*\w\.py\b")
DOTTED = re.compile(r"(?<![\w.])slurmgen(?:\.\w+)+")
# Mentions that are right although no file or name answers them, each with its reason.
ALLOWED: dict[str, str] = {}


def sources() -> list[Path]:
    return sorted(p for top in ("slurmgen", "tests") for p in (REPO / top).rglob("*.py"))


def prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each comment and docstring of ``path``."""
    source = path.read_text(encoding="utf-8")
    found = [
        (t.start[0], t.string)
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.append((first.lineno, first.value.value))
    return found


@cache
def defined(module: Path) -> frozenset[str]:
    """The names a module defines or imports at any depth (a function's attribute, a class's method, ...)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)  # a lazy export (`__getattr__` by name, `__all__`)
    return frozenset(names)


def module_file(parts: list[str]) -> Path | None:
    base = REPO.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def dotted_exists(name: str) -> bool:
    """The name is a module of slurmgen's, or the longest module it starts with defines its next part."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        module = module_file(parts[:end])
        if module is not None:
            return end == len(parts) or parts[end] in defined(module)
    return False


def path_exists(mention: str, where: Path) -> bool:
    return any((base / mention).exists() for base in (REPO, PACKAGE, *where.parents))


def missing() -> list[str]:
    found = []
    for path in sources():
        for line, text in prose(path):
            bad = [m for m in PATH.findall(text) if not path_exists(m, path)]
            bad += [m for m in DOTTED.findall(text) if not dotted_exists(m)]
            found += [f"{path.relative_to(REPO)}:{line}: {m}" for m in bad if m not in ALLOWED]
    return found


def test_every_file_module_and_name_that_comments_mention_exists() -> None:
    assert missing() == []


def test_the_mentions_are_read_and_checked() -> None:
    """Not blind: a known mention of each kind is found, and a gone one is caught."""
    texts = " ".join(text for _, text in prose(PACKAGE / "spec" / "model.py"))
    assert "spec/fields.py" in PATH.findall(texts)
    assert dotted_exists("slurmgen.contract.TASK_MAIN") and dotted_exists("slurmgen.runtime.checkpoint")
    assert not dotted_exists("slurmgen.directives") and not dotted_exists("slurmgen.cli.main")
    assert not path_exists("slurmgen/batch_nodes.py", PACKAGE / "batch" / "nodes.py")
    assert path_exists("checkpoint/layout.py", PACKAGE / "runtime" / "state.py")


# A citation of this project's own tracker, which no reader of the repository can see: "issue N", "issues N and
# M", "defect N", "item N", "round N", or a bare "(#N)". An upstream one names its project ("Lightning #15022",
# "NVIDIA/nccl#704", a URL) and is a citation a reader can follow.
TRACKER = re.compile(r"\b(?:issues?|defects?|items?|rounds?)[\s#]*\d+|(?<![\w/.-])\(#\d+\)", re.IGNORECASE)
CITED_IN = ("slurmgen", "tests", "bench", "docs", "templates", "jobs", "README.md", "pyproject.toml", "mkdocs.yml")


def tracker_citations() -> list[str]:
    found = []
    for top in CITED_IN:
        root = REPO / top
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue  # an image, a recorded binary
            for cite in TRACKER.finditer(text):
                line = text.count("\n", 0, cite.start()) + 1
                found.append(f"{path.relative_to(REPO)}:{line}: {' '.join(cite[0].split())}")
    return found


def test_no_comment_or_page_cites_the_projects_own_tracker() -> None:
    """Say what the issue meant (the behaviour, the reason) instead of its number."""
    assert tracker_citations() == []


def test_the_tracker_citations_are_caught() -> None:
    n = 12
    for text in (f"(issue {n})", f"Issue {n} item {n}", f"issues {n} and {n + 1}", f"issue\n    # {n}", f"(#{n})"):
        assert TRACKER.search(text), text
    for text in (f"Lightning #{n}", f"NVIDIA/nccl#{n}", f"color:#{n}", "an issue", f"pytorch/pytorch/issues/{n}"):
        assert not TRACKER.search(text), text
