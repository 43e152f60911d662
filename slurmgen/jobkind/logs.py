"""Reading a job's logs through its handle, the same for every kind of job: the CLI's `logs` and `Job.logs()`."""

from __future__ import annotations

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
    from slurmgen.manage.logs import Follower

    found = view.files()
    if not found:
        if view.others():
            raise UsageError(view.missing())
        return b""
    chunks: list[bytes] = []
    Follower(out=chunks.append, cwd=Path.cwd()).poll(found)
    return b"".join(chunks)
