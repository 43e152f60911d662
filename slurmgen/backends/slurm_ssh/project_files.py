"""Which files of the project a snapshot takes, and from where: git's list inside a git repository, else the
directory's own files.

Inside a repository: the files git tracks (as they are in the working tree) and the untracked files git does not
ignore (`git ls-files --cached --others --exclude-standard`), run with the repository as the working directory
rather than `git -C`, which git before 1.8.5 does not have. A `git` that does not run (none on PATH; macOS's stub,
which prints "xcode-select: note: no developer tools were found" and exits 1) is said in one line naming git and how
to get it, never as "not a git repository".

Outside any repository (no `.git` in the directory or above it): every regular file under the directory, minus
slurmgen's own (`.slurmgen/`) and Python's caches (`__pycache__/`), and minus what the directory's top-level
`.gitignore` names, read by this module (git is not needed) in a subset of gitignore(5): blank lines and `#`
comments skipped; a pattern ending in `/` names directories only; a pattern with a `/` elsewhere is matched
against the path from the directory (fnmatch's `*`, `?`, `[...]`; `**` as any number of directories), one without
against every file and directory name; `!` (re-include) is not read, and said once. The rule is the same whether
or not git is installed, so the same directory always gives the same snapshot.

Either way the selection (`select`) then leaves out what is not code: slurmgen's own `.slurmgen/` (the journal,
local runs' scripts with literal environment values) at any depth, the project's top-level `logs/`, and the spec's
`output` and `preemption.state_dir` when they lie inside the project, so that a local run between two submits
changes nothing that is sent. A directory reached through a link that points outside the project is left out with
one line: git still lists the files of a tracked directory replaced by such a link, and reading through it would
upload whatever the link points at.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from slurmgen.errors import SlurmgenError

GIT_HELP = (
    "install git (Debian/Ubuntu: apt install git; Fedora: dnf install git; macOS: xcode-select --install; "
    "Windows: Git for Windows)"
)
ALWAYS_LEFT_OUT = (".slurmgen", "__pycache__", ".git")  # slurmgen's journal, Python's caches
TOP_LEFT_OUT = ("logs",)  # the default `output` of a local run, at the project's top


class GitUnusable(SlurmgenError):
    """The project is a git repository, and git does not run here."""


@dataclass(frozen=True)
class Listed:
    root: Path  # the repository's top, or the directory itself
    names: tuple[str, ...]  # relative to root, sorted
    git: bool  # listed by git (commit and dirty can be asked)
    note: str | None = None  # the one line saying the files were not git's


def git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """git in ``root`` (cwd, not `-C`: git before 1.8.5 has no -C)."""
    return subprocess.run(["git", *args], cwd=root, capture_output=True, check=False, timeout=60)


def git_problem() -> str | None:
    """Why git cannot list files here, in a few words (None: it runs)."""
    try:
        done = subprocess.run(["git", "--version"], capture_output=True, check=False, timeout=60)
    except FileNotFoundError:
        return "git is not on PATH"
    except OSError as exc:
        return f"git cannot be run ({exc.strerror or exc})"
    said = (done.stdout + done.stderr).decode(errors="replace").strip()
    if done.returncode != 0 or not said.startswith("git version"):
        last = said.splitlines()[-1] if said else f"exit {done.returncode}"
        return f"git does not run ({last})"
    return None


def repository_top(directory: Path) -> Path | None:
    """The nearest directory at or above ``directory`` holding `.git` (a directory, or a worktree's file)."""
    here = directory.resolve()
    for place in (here, *here.parents):
        if (place / ".git").exists():
            return place
    return None


def list_files(directory: Path) -> Listed:
    """The project's files: git's inside a repository, else the directory's (see the module's rule)."""
    top = repository_top(directory)
    if top is None:
        return _plain_files(directory.resolve())
    problem = git_problem()
    if problem is not None:
        raise GitUnusable(
            f"{top}: a git repository, and {problem}: {GIT_HELP}; or use --no-snapshot to run in a directory "
            "already on the cluster"
        )
    found = git(directory, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        said = found.stderr.decode(errors="replace").strip().splitlines()
        raise GitUnusable(f"{top}: git cannot read this repository ({said[-1] if said else 'no message'!r})")
    root = Path(found.stdout.decode().strip())
    listed = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    names = sorted(set(listed.stdout.decode(errors="surrogateescape").split("\0")) - {""})
    return Listed(root, tuple(names), True)


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    anchored: bool  # matched against the whole path from the root, else against each name
    directory_only: bool


def parse_gitignore(text: str) -> tuple[list[Pattern], bool]:
    """The patterns of a .gitignore this module reads, and whether it held a `!` line it does not. Pure."""
    patterns, negated = [], False
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            negated = True
            continue
        directory_only = line.endswith("/")
        body = line.strip("/") if directory_only else line.lstrip("/")
        anchored = "/" in line.rstrip("/")
        regex = ".*".join(fnmatch.translate(part)[4:-3] for part in body.split("**/"))  # (?s:...)\Z stripped
        patterns.append(Pattern(re.compile(regex.replace(".*.*", ".*") + r"\Z", re.S), anchored, directory_only))
    return patterns, negated


def ignored(path: str, is_dir: bool, patterns: list[Pattern]) -> bool:
    """Whether a path (relative, `/`-separated) is named by one of the patterns. Pure."""
    name = path.rsplit("/", 1)[-1]
    for p in patterns:
        if p.directory_only and not is_dir:
            continue
        if p.regex.match(path if p.anchored else name):
            return True
    return False


def _plain_files(root: Path) -> Listed:
    gitignore = root / ".gitignore"
    patterns, negated = parse_gitignore(gitignore.read_text(errors="replace")) if gitignore.is_file() else ([], False)
    names: list[str] = []
    for here, dirs, files in os.walk(root):
        rel = Path(here).relative_to(root).as_posix()
        prefix = "" if rel == "." else f"{rel}/"
        dirs[:] = sorted(d for d in dirs if d not in ALWAYS_LEFT_OUT and not ignored(prefix + d, True, patterns))
        names += [prefix + f for f in files if not ignored(prefix + f, False, patterns)]
    note = (
        f"note: {root} is not a git repository: the snapshot takes its {len(names)} files, minus those its "
        ".gitignore names (as docs/remote.md says)"
    )
    if negated:
        note += "; its '!' lines are not read without a repository"
    return Listed(root, tuple(sorted(names)), False, note)


@dataclass(frozen=True)
class Selection:
    names: tuple[str, ...]  # what the snapshot takes, relative to the root, sorted
    dropped: frozenset[str]  # what was listed and left out (not code: its change does not make a snapshot dirty)
    notes: tuple[str, ...]  # one line per directory left out because it is read through a link


def inside(root: Path, place: str, start: Path) -> str | None:
    """``place`` (relative to ``start``, or absolute) as a path relative to ``root``; None when outside or unknown
    (a value the batch shell expands). Pure but for resolving links."""
    if not place or "$" in place:
        return None
    target = Path(os.path.realpath(start / place))
    try:
        rel = target.relative_to(os.path.realpath(root))
    except ValueError:
        return None
    return None if rel.as_posix() == "." else rel.as_posix()


def select(root: Path, names: tuple[str, ...], start: Path, not_code: tuple[str, ...] = ()) -> Selection:
    """The names the snapshot takes: ``names`` minus what is not code (the module's rule; ``not_code``: the spec's
    output and state directories, relative to ``start``) and minus what is read through a link out of ``root``."""
    prefixes = [f"{p}/" for p in TOP_LEFT_OUT]
    prefixes += [f"{rel}/" for rel in (inside(root, place, start) for place in not_code) if rel is not None]
    real_root = os.path.realpath(root)
    verdict: dict[str, str | None] = {}  # a directory -> where it leads out of the project (None: it stays in)
    counted: dict[str, int] = {}
    kept: list[str] = []
    dropped: set[str] = set()
    for name in names:
        parts = name.split("/")
        if any(part == ".slurmgen" for part in parts[:-1]) or any(name.startswith(p) for p in prefixes):
            dropped.add(name)
            continue
        out = None
        for depth in range(1, len(parts)):
            here = "/".join(parts[:depth])
            if here not in verdict:
                verdict[here] = _leads_out(root / here, real_root)
            if verdict[here] is not None:
                out = here
                break
        if out is not None:
            counted[out] = counted.get(out, 0) + 1
            dropped.add(name)
            continue
        kept.append(name)
    notes = tuple(
        f"note: {root}/{here} is a link to {verdict[here]}, outside the project: its {n} files are left out of the "
        "snapshot (copy them into the project, or put them on the cluster)"
        for here, n in sorted(counted.items())
    )
    return Selection(tuple(kept), frozenset(dropped), notes)


def _leads_out(path: Path, real_root: str) -> str | None:
    """Where a link at ``path`` points when that is outside the project; None for a plain directory or a link that
    stays inside."""
    if not path.is_symlink():
        return None
    target = os.path.realpath(path)
    return None if target == real_root or target.startswith(real_root.rstrip("/") + "/") else target
