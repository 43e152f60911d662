"""Words of the script's body: data, single-quoted when joined, or `Shell` words the batch shell expands.

Its own module below step.py and sweep.py: both make `Shell` words (the step line; a sweep's placeholders), and
the step line takes the sweep's command words.
"""

from __future__ import annotations

from slurmgen.script.directives import sq


class Shell(str):
    """A word the batch shell expands (already quoted as needed)."""


def quoted(word: str) -> str:
    """One word as shell text: a Shell word as written, data single-quoted."""
    return word if isinstance(word, Shell) else sq(word)


def join(words: list[str]) -> str:
    return " ".join(quoted(w) for w in words)
