"""Reading a job's logs through its handle, the same for every kind of job: the CLI's `logs` and `Job.logs()`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from slurmgen.backends.interface import JobHandle, LogView
from slurmgen.errors import UsageError


def check_choice(rank: int | None, node: str | None) -> None:
    """--rank and --node: a valid node name, and not both (a rank's log holds only that rank's output)."""
    from slurmgen.queries.logs import check_node_name

    if node is not None:
        check_node_name(node)
    if node is not None and rank is not None:
        raise UsageError("--node and --rank exclude each other: a rank's log holds only that rank's output")


def failed_first(job: JobHandle, label: str) -> tuple[int, str]:
    """The rank that failed first on its own in the job's last run that had a failed task, and a line naming it
    (`logs --failed`). Found in the run history, which holds a file per failed task, never one per rank: the
    casualties (ranks that lost their peers, or died of the step's signal after it failed) are told apart from the
    cause as the batch shell tells them (slurmgen.interruption.casualty.first_failure). A UsageError when no task
    failed on its own."""
    from slurmgen import run_history
    from slurmgen.interruption.casualty import first_failure
    from slurmgen.printable import printable

    dirs, why_none = job.history_dirs()
    for log_dir in reversed(dirs):  # the latest submission's first (a resumed job's new id comes last)
        events = run_history.read(str(log_dir))
        failed_runs = sorted({int(e["run"]) for e in events if e.get("event") == run_history.TASK_EXIT and
                              isinstance(e.get("run"), int)})  # fmt: skip
        for run in reversed(failed_runs):
            failure = first_failure(events, run)
            if failure is not None:
                return failure.rank, f"{printable(failure.describe())} failed first, in run {run}: its log"
    raise UsageError(f"job {label}: no task failed on its own in its run history" + (f" ({why_none})" if why_none
                     and not dirs else ""))  # fmt: skip


def read_logs(view: LogView) -> bytes:
    """Every file of the view, each after a `==> file <==` header. Empty when the job has printed nothing yet (it
    is pending, or has not started its first step); a UsageError when it has logs but not of the rank or node
    asked for (a typo, not a wait)."""

    chunks: list[bytes] = []
    write_logs(view, chunks.append)
    return b"".join(chunks)


def write_logs(view: LogView, out: Callable[[bytes], None]) -> bool:
    """Stream every file of the view to ``out``, a chunk at a time (a log of any size, little memory: `slurmgen
    logs`); False when the job has printed nothing yet, a UsageError as read_logs."""
    from slurmgen.queries.logs import Follower

    found = view.files()
    if not found:
        if view.others():
            raise UsageError(view.missing())
        return False
    Follower(out=out, cwd=Path.cwd()).poll(found)
    return True
