"""The words Slurm's commands print for a value: durations, local datetimes, the words for "no value", counts that
may carry a suffix, and release versions. One reading of each for every parser (parse.py, showjob.py,
array_queue.py, site_config.py) and for the batch shell, which reads the site's recorded version back.

Pure and standard-library only (the in-task runtime imports this). Pinned by the recorded output of every Slurm
version in tests/data/slurm/<version>/.
"""

from __future__ import annotations

import re
from datetime import datetime

_NONE_WORDS = frozenset({"", "(null)", "None", "N/A", "Unknown", "UNLIMITED", "INFINITE", "NOT_SET", "INVALID"})
_DURATION = re.compile(r"(?:(?P<d>\d+)-)?(?:(?:(?P<h>\d+):)?(?P<m>\d+):)?(?P<s>\d+)")


def parse_duration(text: str) -> int | None:
    """Seconds from Slurm's ``[days-][hours:]minutes:seconds`` (RunTime=, TimeLimit=, squeue %M/%l).

    None for UNLIMITED and the other "no value" words, and for anything unparseable.
    """
    match = _DURATION.fullmatch(text.strip())
    if text.strip() in _NONE_WORDS or match is None or (match["m"] is None and match["d"] is None):
        return None
    d, h, m, s = (int(match[k] or 0) for k in "dhms")
    return ((d * 24 + h) * 60 + m) * 60 + s


def parse_datetime(text: str) -> datetime | None:
    """Slurm's local-time ``2026-11-21T08:01:39``; None for Unknown/None/N/A."""
    if text.strip() in _NONE_WORDS:
        return None
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return None


def optional(text: str | None) -> str | None:
    return None if text is None or text.strip() in _NONE_WORDS else text


def leading_int(text: str | None) -> int | None:
    match = re.match(r"\d+", text or "")
    return int(match[0]) if match else None


def version_tuple(version: str | None) -> tuple[int, int] | None:
    """(22, 5) for "22.05.8"; None when unknown."""
    match = re.match(r"\s*(\d+)\.(\d+)", version or "")
    return (int(match[1]), int(match[2])) if match else None
