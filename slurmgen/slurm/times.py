"""Slurm's time strings: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS` (sbatch(1), --time).

Standard library only: the runtime and the status display use it too.
"""

from __future__ import annotations

import re

UNLIMITED = ("UNLIMITED", "INFINITE")
MAX_TIME_CHARS = 32  # the longest real form, D-HH:MM:SS with a large day count, is far shorter

_DAYS = re.compile(r"^(\d+)-(\d+)(?::(\d+))?(?::(\d+))?$")
_PLAIN = re.compile(r"^(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_time(text: str) -> int | None:
    """Seconds for a Slurm time string; None for an unlimited one ("UNLIMITED", "INFINITE", "0").

    Raises ValueError with a message meant for the user when the text is not one of Slurm's forms.
    """
    value = text.strip()
    if len(value) > MAX_TIME_CHARS:  # and never int() of thousands of digits (CPython refuses 4,300 of them)
        raise ValueError(f"{text[:40]!r}... ({len(text)} characters) is not a Slurm time; use MM, MM:SS, HH:MM:SS, "
                         "D-HH, D-HH:MM or D-HH:MM:SS")  # fmt: skip
    if value.upper() in UNLIMITED:
        return None
    match = _DAYS.match(value)
    if match:
        days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
        if hours > 23:
            raise ValueError(f"{text!r}: hours after the day count must be 0-23")
        _check_sixty(text, minutes, seconds)
        total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
        return total or None
    match = _PLAIN.match(value)
    if not match:
        raise ValueError(f"{text!r} is not a Slurm time; use MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS")
    parts = [int(g) for g in match.groups() if g is not None]
    if len(parts) == 1:
        total = parts[0] * 60  # a bare number is minutes
    elif len(parts) == 2:
        _check_sixty(text, 0, parts[1])
        total = parts[0] * 60 + parts[1]
    else:
        _check_sixty(text, parts[1], parts[2])
        total = (parts[0] * 60 + parts[1]) * 60 + parts[2]
    return total or None


def _check_sixty(text: str, minutes: int, seconds: int) -> None:
    if minutes > 59 or seconds > 59:
        raise ValueError(f"{text!r}: minutes and seconds must be 0-59")


def slurm_minutes(seconds: int) -> int:
    """Slurm keeps limits in whole minutes and rounds seconds up (sbatch(1): "rounded up")."""
    return -(-seconds // 60)


def format_duration(seconds: int | None) -> str:
    """Seconds as Slurm prints them: `MM:SS`, `HH:MM:SS` or `D-HH:MM:SS`; None as UNLIMITED."""
    if seconds is None:
        return "UNLIMITED"
    days, rest = divmod(max(0, seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"
