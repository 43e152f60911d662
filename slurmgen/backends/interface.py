"""The job interface: one backend per kind of job (`Backend`: dry-run, test-only, submit, follow, and attaching to
a job), and one handle for every job of any kind (`JobHandle`), so the CLI's job commands and `slurmgen.submit`,
`Job` and `Sweep` ask the same questions the same way and never branch on what the job is.

A backend is found in slurmgen.backends.registry, by the cluster profile of a submission or by the id of a job.
The kinds: Slurm on this machine (slurmgen.backends.slurm_here), Slurm over ssh (slurmgen.backends.slurm_ssh), and
local emulation (slurmgen.backends.emulated); each has its job handle and its group (a sweep, a local array: the
shared part is slurmgen.backends.groups), whose `point(i)` is a job handle again. A handle answers status, logs
(of a rank or a node, once or followed), history, cancel (or a signal), requeue, resume, wait and report. A user's
argument (`123`, `123_4`, `local-3`, `local-3_0`, a sweep id, a spec path, a job or sweep name) becomes one handle
in one place: slurmgen.backends.registry.

What a backend or a handle says is data (a Report: lines for stdout, lines for stderr, an exit code; a Submitted;
a DryRun); only the CLI prints. What a kind cannot do it says in one line (`Backend.cannot`), a UsageError that
every door shows as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from slurmgen.errors import UsageError
from slurmgen.submission.source import SpecSource

if TYPE_CHECKING:
    from slurmgen.queries.goodput_view import Goodput
    from slurmgen.slurm.client import SlurmClient

Say = Callable[[str], object]


@dataclass(frozen=True)
class Report:
    """What a command says: `out` (results: a table, a job id) for stdout, `notes` for stderr, its exit code."""

    out: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    code: int = 0


@dataclass(frozen=True)
class LogView:
    """The log files of a job as they are now, and how to follow them: `files()` looks again; `ended()` says
    whether the job has ended (asked only while the files are quiet); `poll` is the seconds between those asks;
    `missing` says in one line why there is no file yet; `others()` are the job's files of any rank or node (some
    while `files()` has none: the rank or node asked for has no log)."""

    files: Callable[[], list[Path]]
    others: Callable[[], list[Path]]
    ended: Callable[[], bool]
    poll: float
    missing: Callable[[], str]
    escape: bool = False  # printed with control characters escaped (slurmgen.printable): files from another machine


class JobHandle(Protocol):
    """One job, or one group of jobs (a sweep, an array), of any kind."""

    @property
    def label(self) -> str:
        """The id every job command takes, as it is printed: `123`, `123_4`, `local-3`, `local-3_0`, a sweep id."""
        ...

    @property
    def notes(self) -> tuple[str, ...]:
        """What the resolution of the user's argument has to say (e.g. that `3` is Slurm's job 3, not local-3)."""
        ...

    def status(self) -> Report:
        """The status table (one row per job, array task or point) and its notes."""
        ...

    def state(self) -> str:
        """The state word (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, UNKNOWN...)."""
        ...

    def exit_code(self) -> int | None:
        """The exit code once the job has ended, else None."""
        ...

    def wait(self, pause: Callable[[float], None]) -> str:
        """Wait until the job has ended for good (``pause`` sleeps between looks and may raise); its final state."""
        ...

    def logs(self, rank: int | None, node: str | None) -> LogView:
        """The job's log files (only rank N's, or one node's, when asked)."""
        ...

    def code(self) -> str | None:
        """What code the job runs, where slurmgen took it (a remote job's snapshot and commit); None when the job
        runs the files in its directory as they are."""
        ...

    def args(self) -> tuple[str, ...]:
        """The words given after `--` when the job was submitted (the last words of its command); () for none."""
        ...

    def history_dirs(self) -> tuple[list[Path], str]:
        """The job's log directories, whose `history/` holds its run history (slurmgen.run_history), and why there
        would be none to show, in one line."""
        ...

    def history_points(self) -> list[tuple[int, str, list[Path]]] | None:
        """A group's points (a sweep, a local array): each point's index, its values as status shows them and the
        log directories of its latest job (`history SWEEP` lists every point's runs); None for one job."""
        ...

    def cancel(self, signal: str | None, to: str | None) -> Report:
        """Cancel it (nothing when it ended already), or send it a signal, routed as `slurmgen cancel` routes it."""
        ...

    def requeue(self, hold: bool, finished: bool) -> Report:
        """Requeue it: it starts again from the top of its script with the same id."""
        ...

    def resume(self, say: Say) -> Report:
        """Bring it back from its last saved state; the new job's id on stdout when there is a new job."""
        ...

    def point(self, index: int) -> JobHandle:
        """Point (or array task) ``index`` of a sweep; a UsageError for a plain job."""
        ...

    def goodput(self) -> Goodput:
        """Where its time went, from its run histories (slurmgen report): goodput, badput buckets, timeline, advice."""
        ...


Warn = Callable[[str], None]


@dataclass(frozen=True)
class Submitted:
    """What a submission gave: the id status/logs/cancel take (a job id, a local id, or a sweep's id), the line that
    says so, and the job's exit code when the backend ran it to its end already (a local run), else None."""

    label: str
    message: str
    exit_code: int | None = None


@dataclass(frozen=True)
class DryRun:
    """What `submit --dry-run` shows: the script as it would be written (secrets masked) and, for stderr, the files
    it would write and the submission line(s)."""

    script: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Request:
    """One submission: the spec (and the cluster profile under it), the template directory, whether a backend that
    ships the code takes a snapshot of it (``snapshot``; without, `--no-snapshot`, the job starts in ``code_dir``,
    already on the cluster); ``one`` refuses a sweep with that line, ``many`` a single job, before anything is
    sent; ``check``: the spec's ``python`` is asked for its version where the job is submitted and refused below
    slurmgen's floor before anything is sent (slurmgen.python_check; `--no-check` turns it off)."""

    source: SpecSource
    templates: Path | None = None
    code_dir: str | None = None
    snapshot: bool = True
    one: str | None = None
    many: str | None = None
    check: bool = True


class Backend(Protocol):
    """One kind of job, as torchx's Scheduler is one scheduler (torchx/schedulers/api.py: submit_dryrun, schedule,
    describe, log_iter, cancel): what the CLI and `slurmgen.submit`/`Job`/`Sweep` ask to submit, and the handle
    (JobHandle) that answers status, logs, cancel, requeue, resume, history and report for a job it submitted.

    What a kind cannot do is in `cannot`: the question (`dry_run`, `would_run`, `follow`, `requeue`, ...) and the
    one line it says, raised as a UsageError through every door."""

    @property
    def name(self) -> str:
        """The registry's key of the kind: `slurm`, `ssh`, `local`."""
        ...

    @property
    def cannot(self) -> Mapping[str, str]:
        """The questions this kind cannot answer, each with the one line it says instead."""
        ...

    def dry_run(self, request: Request, warn: Warn) -> DryRun:
        """Plan the submission and show it; nothing is written or sent."""
        ...

    def would_run(self, request: Request, warn: Warn) -> str:
        """Ask the scheduler whether and when the job could run (`sbatch --test-only`); the line that says so."""
        ...

    def launch(self, request: Request, warn: Warn) -> Submitted:
        """Submit one job or a sweep (a group of points: every kind sends it through slurmgen.submission's one sweep
        path, or runs it point by point); never twice (a lost answer is found again by the submission's token)."""
        ...

    def follow(self, label: str, progress: Callable[[str], None]) -> Followed:
        """Follow a job just submitted to its end (`submit --wait`): ``progress`` gets each new state line."""
        ...

    def job(self, label: str) -> JobHandle:
        """The handle of a job (or sweep) of this kind by its id, as `submit` printed it."""
        ...

    def site_client(self) -> SlurmClient:
        """The Slurm commands of the cluster this kind submits to, for the site's questions (`slurmgen doctor`)."""
        ...


@dataclass(frozen=True)
class Followed:
    """How a followed job ended: its id, state word, exit code, the line that says so, and the rank that failed
    first (when its run history knows)."""

    job: str
    state: str
    exit_code: int
    message: str
    failing: str | None = None


def unsupported(backend: Backend, question: str) -> UsageError:
    """The one line a kind says for a question it cannot answer (Backend.cannot), as an error of every door."""
    return UsageError(backend.cannot[question])
