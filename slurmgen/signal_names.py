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


def parse_sbatch_signal(value: str) -> tuple[str, str, int] | str:
    """sbatch's `--signal=[{R|B}:]<sig>[@<time>]` (sbatch(1); src/common/proc_args.c get_signal_opts) ->
    (where: "" or "B" or "R", the canonical signal name, seconds before the end: 60 when left out), or what is
    wrong with it, in words with the fix."""
    text = value.strip()
    where, sep, rest = text.partition(":")
    if not sep:
        where, rest = "", text
    where = where.upper()
    name_part, at, seconds_part = rest.partition("@")
    fix = "write [B:]SIG[@seconds], e.g. B:USR1@120 (B: sends it to the batch shell, which forwards it)"
    if where not in ("", "B", "R"):
        return f"{value!r}: {where}: is not B: or R:; {fix}"
    name = signal_name(name_part) if name_part.strip() else None
    if name is None or name in ("KILL", "STOP"):
        return f"{value!r}: {name_part!r} is not a signal a program can catch; {fix}"
    if not at:
        return (where, name, 60)
    if not (seconds_part.isdigit() and seconds_part.isascii() and int(seconds_part) <= 65535):
        return f"{value!r}: the time after @ must be whole seconds from 0 to 65535; {fix}"
    return (where, name, int(seconds_part))


# torchrun forwards only TERM, INT, HUP and QUIT by default (torch/distributed/run.py, --signals-to-handle;
# pytorch#154849); the preemption signal and USR2 (clean exit) must be added.
ELASTIC_DEFAULT = ("TERM", "INT", "HUP", "QUIT")


def elastic_signals(preempt_signal: str | None) -> tuple[str, ...]:
    """The signals a per-node launcher (torchrun, or accelerate launch's torchrun) handles and forwards to its
    workers, with the SIG prefix as torchrun reads them: its defaults, the preemption signal (None: off), USR2.
    The one formula for the rendered torchrun line and accelerate's agent."""
    names = list(ELASTIC_DEFAULT)
    for extra in (preempt_signal, "USR2"):
        if extra and extra not in names:
            names.append(extra)
    return tuple("SIG" + name for name in names)
