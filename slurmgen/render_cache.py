"""A cache of rendered scripts, keyed by everything a rendering depends on (like ccache for compilers).

A rendering is a pure function of: the spec file's bytes and the path it was given as (warnings name it), the
`--set` overrides, every template file that could be loaded (the user's directory and ours), and slurmgen's own
code. The key hashes all of them, so a hit returns exactly what a fresh rendering would print; a failing spec is
never cached. A hit imports nothing beyond the standard library's os, sys and hashlib, which is what makes a
repeated `slurmgen render` cheaper than starting most Python tools. Set SLURMGEN_NO_CACHE=1 to bypass it.

Entry format: the number of stderr lines, those lines, then the script text.
"""

from __future__ import annotations

import hashlib
import os
import sys

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
MAX_ENTRIES = 512


def cache_dir() -> str | None:
    if os.environ.get("SLURMGEN_NO_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "slurmgen")


def builtin_templates() -> str:
    packaged = os.path.join(_PACKAGE, "templates")
    return packaged if os.path.isdir(packaged) else os.path.join(os.path.dirname(_PACKAGE), "templates")


def _hash_tree(h: hashlib._Hash, root: str, contents: bool) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if not contents and not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            h.update(path.encode("utf-8", "surrogateescape") + b"\0")
            if contents:
                with open(path, "rb") as f:
                    h.update(f.read())
            else:
                st = os.stat(path)
                h.update(f"{st.st_mtime_ns}:{st.st_size}".encode())


def key(spec: str, overrides: list[str], templates: str | None) -> str | None:
    """The cache key, or None if an input cannot be read (the normal path then reports it)."""
    h = hashlib.sha256()
    h.update(sys.version.encode())
    try:
        with open(spec, "rb") as f:
            h.update(f.read())
        h.update(b"\0spec\0" + spec.encode("utf-8", "surrogateescape"))
        for item in overrides:
            h.update(b"\0set\0" + item.encode("utf-8", "surrogateescape"))
        for root in (templates, builtin_templates()):
            if root is not None:
                if not os.path.isdir(root):
                    return None
                h.update(b"\0templates\0")
                _hash_tree(h, root, contents=True)
        # Our own code: a changed slurmgen (an editable install, an upgrade) must not serve old results.
        h.update(b"\0code\0")
        _hash_tree(h, _PACKAGE, contents=False)
    except (OSError, UnicodeError):
        return None
    return h.hexdigest()


def load(digest: str) -> tuple[list[str], str] | None:
    directory = cache_dir()
    if directory is None:
        return None
    try:
        with open(os.path.join(directory, "render", digest), encoding="utf-8") as f:
            count = int(f.readline())
            lines = [f.readline().rstrip("\n") for _ in range(count)]
            return lines, f.read()
    except (OSError, ValueError):
        return None


def store(digest: str, messages: list[str], script: str) -> None:
    """Best effort: a read-only home or a full disk only costs speed."""
    directory = cache_dir()
    if directory is None:
        return
    target = os.path.join(directory, "render")
    try:
        os.makedirs(target, mode=0o700, exist_ok=True)
        tmp = os.path.join(target, f".{digest}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{len(messages)}\n")
            for line in messages:
                f.write(line.replace("\n", " ") + "\n")
            f.write(script)
        os.replace(tmp, os.path.join(target, digest))
        prune(target)
    except OSError:
        pass


def prune(target: str) -> None:
    """Keep the MAX_ENTRIES newest files of a cache directory (the render entries, submit's job sidecars)."""
    entries = [e for e in os.scandir(target) if not e.name.startswith(".")]
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda e: e.stat().st_mtime)
    for entry in entries[: len(entries) - MAX_ENTRIES]:
        try:  # noqa: SIM105 - contextlib would be one more import on the hot path
            os.unlink(entry.path)
        except OSError:
            pass
