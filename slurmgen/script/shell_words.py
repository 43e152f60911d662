"""Words of the script's body: data, single-quoted when joined, or `Shell` words the batch shell expands.

Its own module below step.py and sweep.py: both make `Shell` words (the step line; a sweep's placeholders), and
the step line takes the sweep's command words.
"""

from __future__ import annotations

from slurmgen.script.directives import sq


class Shell(str):
    """A word the batch shell expands (already quoted as needed)."""


def join(words: list[str]) -> str:
    return " ".join(w if isinstance(w, Shell) else sq(w) for w in words)
