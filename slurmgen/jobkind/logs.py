"""Reading a job's logs through its handle, the same for every kind of job: the CLI's `logs` and `Job.logs()`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from slurmgen.errors import UsageError
from slurmgen.jobkind import LogView


def check_choice(rank: int | None, node: str | None) -> None:
    """--rank and --node: a valid node name, and not both (a rank's log holds only that rank's output)."""
    from slurmgen.manage.logs import check_node_name

    if node is not None:
        check_node_name(node)
    if node is not None and rank is not None:
        raise UsageError("--node and --rank exclude each other: a rank's log holds only that rank's output")


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
    from slurmgen.manage.logs import Follower

    found = view.files()
    if not found:
        if view.others():
            raise UsageError(view.missing())
        return False
    Follower(out=out, cwd=Path.cwd()).poll(found)
    return True
