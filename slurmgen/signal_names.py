"""Signal names as Slurm and bash write them (`USR1`, no SIG prefix): the one reader of a signal name, for the
spec, the CLI, the Slurm client and the in-task runtime alike. Standard library only."""

from __future__ import annotations

import signal as _signal

# Signals a user may choose for "checkpoint and requeue". USR2 (clean exit), TERM (save and exit), CONT (Slurm
# sends it before every signal), INT (two of them end an srun step), KILL and STOP (uncatchable) are taken.
PREEMPTION_SIGNALS = ("USR1", "HUP", "ALRM", "URG", "XCPU", "VTALRM", "PROF", "WINCH", "PWR")

_RESERVED = {
    "USR2": "USR2 is the clean-exit signal (scancel --signal=USR2)",
    "TERM": "TERM already means 'save and exit'; Slurm sends it at the limit and on preemption",
    "CONT": "Slurm sends CONT before every signal",
    "INT": "srun ends the whole step on two INTs",
    "KILL": "KILL cannot be caught",
    "STOP": "STOP cannot be caught",
}


def signal_name(value: str | int) -> str | None:
    """`SIGUSR1`, `usr1`, `10`, `SIG10` -> `USR1`; None if it names no signal on this platform."""
    if isinstance(value, str):
        digits = value.strip().upper().removeprefix("SIG")
        if digits.isdigit() and digits.isascii():
            value = int(digits)
    if isinstance(value, int):
        try:
            return _signal.Signals(value).name.removeprefix("SIG")
        except ValueError:
            return None
    text = value.strip().upper().removeprefix("SIG")
    return text if hasattr(_signal, "SIG" + text) and not text.startswith("_") else None


def require_signal_name(text: str, what: str = "") -> str:
    """The canonical name, or a UsageError naming the option (``what``) and what to write instead."""
    from slurmgen.errors import UsageError

    name = signal_name(text)
    if name is None:
        prefix = f"{what}: " if what else ""
        raise UsageError(f"{prefix}not a signal name or number: {text!r} (e.g. USR1, USR2, TERM, INT)")
    return name


def preemption_signal_problem(value: str | int) -> str | None:
    """None if `value` may be the preemption signal; otherwise what to write instead."""
    if isinstance(value, str) and ":" in value:
        return "write only the signal name; slurmgen decides where Slurm delivers it (B: is added for you)"
    name = signal_name(value)
    if name in PREEMPTION_SIGNALS:
        return None
    why = _RESERVED.get(name or "", "")
    return (
        f"{value!r} cannot be the preemption signal{': ' + why if why else ''}; "
        f"use one of {', '.join(PREEMPTION_SIGNALS)}"
    )
