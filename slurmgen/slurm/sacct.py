"""sacct's answers, per Slurm version: the rows of ``sacct --noheader --parsable2 --allocations
--format=JobID,State,ExitCode[,SLUID]`` and what their exit codes mean. Pure functions.

ExitCode is ``code:signal`` from the job's wait status (src/sacct/print.c, WEXITSTATUS and WTERMSIG). Before
Slurm 25.11 sacct subtracted 128 from a code of 128 or more, so a batch script that exited 143 (a shell whose
child died of SIGTERM) read ``15:0``, and no code sacct printed told which it was; from 25.11 it prints the code
itself, as `scontrol show job` always did (SchedMD/slurm commit 831571cb84, "sacct - don't subtract 128 from
exit codes above 128", CHANGELOG/slurm-25.11.md). Where the code is not exact, ask `scontrol show job` instead.

SLUID (sacct(1) of 25.11, "A unique identifier for a specific run of a job. Unlike a job ID, the SLUID changes
each time a job is requeued/restarted/resized"): a run's own id, where the field is asked for and Slurm has it
(slurmgen.slurm.ids.parse_sluid says its form).
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmgen.slurm.ids import parse_sluid, state_name

# The first release whose sacct prints codes of 128 and more as they are (tag slurm-25-11-0-0rc1 holds the change).
EXACT_CODES_FROM = (25, 11)
FORMAT = "JobID,State,ExitCode,SLUID"


@dataclass(frozen=True)
class SacctRow:
    """One allocation's row: its id, state word, exit code and signal, whether the code is exact, and its SLUID."""

    job: str
    state: str
    exit_code: int | None
    signal: int | None
    exact: bool  # False: this sacct may have printed code - 128 (before 25.11, or an unknown version)
    sluid: str | None = None


def codes_exact(version: tuple[int, int] | None) -> bool:
    """Whether sacct's printed codes are the jobs' own: from 25.11. Before it every printed code 0..127 may also
    be that code plus 128, and an unknown version may be either."""
    return version is not None and version >= EXACT_CODES_FROM


def exit_field(field: str, version: tuple[int, int] | None) -> tuple[int | None, int | None, bool]:
    """(code, signal or None, exact) of one ExitCode field, ``3:0`` or ``0:15``."""
    code_text, sep, signal_text = field.strip().partition(":")
    if not sep or not code_text.isdigit() or not signal_text.isdigit():
        return None, None, False
    code, signal = int(code_text), int(signal_text)
    if signal:  # killed by a signal: sacct prints 0 as the code on every version
        return code, signal, True
    return code, None, codes_exact(version)


def parse_rows(text: str, version: tuple[int, int] | None) -> list[SacctRow]:
    """Every row of ``--parsable2`` output in FORMAT's order (a row without SLUID, from an older format, too)."""
    rows = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 3 or not parts[0]:
            continue
        code, signal, exact = exit_field(parts[2], version)
        sluid = parse_sluid(parts[3]) if len(parts) > 3 else None
        rows.append(SacctRow(parts[0], state_name(parts[1]), code, signal, exact, sluid))
    return rows
