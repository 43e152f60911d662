"""`slurmgen logs`: the batch log, the per-node logs and the ranks' logs of a job, printed or followed.

Where they are (templates/sbatch.sh.j2, slurmgen.script.directives): the batch log is `<output>/<name>-<key>.log` and
the per-node logs are `<output>/<name>-<key>/<node>.log`, where key is `<array>_<task>` for an array task and
the job id otherwise; next to them, `rank-<N>.log` holds what rank N's program printed (its supervisor opens it
for the program: slurmgen.task.supervisor). All are opened in append mode, so every requeued run adds to the
same files, and the batch shell starts each run with a `slurmgen: job <key>, run <n>, ...` line. The journal
knows `<output>` and `<name>` for jobs submitted from here; for other jobs `scontrol show job` gives the batch log
(StdOut=).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slurmgen import contract
from slurmgen.errors import UsageError
from slurmgen.journal import Entry
from slurmgen.slurm.showjob import JobInfo
from slurmgen.submission.targets import Target

POLL = 0.5  # seconds between looks at the files while following (local reads: cheap)
STATE_POLL = 10.0  # seconds between questions to slurmctld whether the job ended, asked only while files are quiet
SETTLE = 2  # polls without growth after the job ended before -f stops (late lines of slow nodes)


def batch_logs(target: Target, infos: Sequence[JobInfo]) -> list[Path]:
    """The batch log paths of the job: from the journal when it knows the job, else from Slurm's StdOut=."""
    entry: Entry | None = target.entry
    if entry is not None and entry.log_dir:
        base = Path(entry.log_dir)
        if entry.array and target.job.array_task is None:
            return sorted(base.glob(f"{glob_escape(entry.name)}-{target.job.job}_*.log"))
        return [base / f"{entry.name}-{target.key}.log"]
    found = [Path(i.stdout) for i in infos if i.stdout and Path(i.stdout).is_absolute()]
    return list(dict.fromkeys(found))


def glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


RANK_LOG = re.compile(r"rank-(\d+)\.log")  # contract.rank_log_name


def _job_dir(batch_log: Path) -> Path | None:
    directory = batch_log.with_suffix("") if batch_log.suffix == ".log" else None
    return directory if directory is not None and directory.is_dir() else None


def node_logs(batch_log: Path) -> list[Path]:
    """`<name>-<key>.log` -> the per-node logs in `<name>-<key>/` (srun's, and what is not a rank's), by node."""
    directory = _job_dir(batch_log)
    if directory is None:
        return []
    return sorted(p for p in directory.glob("*.log") if not RANK_LOG.fullmatch(p.name))


def rank_logs(batch_log: Path) -> list[Path]:
    """The ranks' own logs in `<name>-<key>/` (`rank-<N>.log`: what each program printed), by rank."""
    directory = _job_dir(batch_log)
    if directory is None:
        return []
    found = [(int(m[1]), p) for p in directory.glob("rank-*.log") if (m := RANK_LOG.fullmatch(p.name))]
    return [p for _, p in sorted(found)]


def select(batch: Iterable[Path], node: str | None, rank: int | None = None) -> list[Path]:
    """Every file to show, batch logs first, then the node logs and the rank logs; with ``node`` only that node's
    log(s), with ``rank`` only that rank's."""
    files: list[Path] = []
    for log in batch:
        if rank is not None or node is not None:
            # One rank's or one node's file by its name: a job of 16,384 ranks is not listed to find it.
            directory = _job_dir(log)
            name = contract.rank_log_name(rank) if rank is not None else f"{node}.log"
            if (
                directory is not None
                and (directory / name).is_file()
                and (rank is not None or not RANK_LOG.fullmatch(name))
            ):
                files.append(directory / name)
            continue
        nodes, ranks = node_logs(log), rank_logs(log)
        files += [log, *nodes, *ranks] if log.exists() else [*nodes, *ranks]
    return files


def missing_message(
    target: Target, batch: Sequence[Path], node: str | None, infos: Sequence[JobInfo], rank: int | None = None
) -> str:
    where = ", ".join(str(b) for b in batch) or "nowhere (Slurm does not know the job, nor does the journal)"
    if rank is not None:
        ranks = sorted({int(m[1]) for b in batch for r in rank_logs(b) if (m := RANK_LOG.fullmatch(r.name))})
        shown = ", ".join(map(str, ranks)) or "none yet"
        return f"job {target.job}: no log of rank {rank} (ranks with logs: {shown})"
    if node is not None:
        known = sorted({n.stem for b in batch for n in node_logs(b)})
        return f"job {target.job}: no log of node {node} (nodes with logs: {', '.join(known) or 'none yet'})"
    state = f" It is {infos[0].state_name}." if infos else ""
    return f"job {target.job}: no log files yet (looked for {where}).{state}"


def label(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


CHUNK = 1 << 20  # bytes read and printed at a time


@dataclass
class Follower:
    """Prints what each file gained since the last look; a header whenever the source changes (like tail)."""

    out: Callable[[bytes], None]
    cwd: Path
    offsets: dict[Path, int] = field(default_factory=dict)
    current: Path | None = None

    def poll(self, files: Iterable[Path]) -> bool:
        grew = False
        for path in files:
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            start = self.offsets.get(path, 0)
            if size < start:  # truncated (not by Slurm, which appends): start over
                start = 0
            if size == start:
                self.offsets.setdefault(path, start)
                continue
            if self.current != path:
                first = self.current is None
                self.out(f"{'' if first else chr(10)}==> {label(path, self.cwd)} <==\n".encode())
                self.current = path
            # In chunks: a log of many GiB streams through a small buffer, never held whole in memory.
            with path.open("rb") as handle:
                handle.seek(start)
                left = size - start
                while left > 0 and (data := handle.read(min(CHUNK, left))):
                    self.out(data)
                    left -= len(data)
                    self.offsets[path] = start = start + len(data)
            grew = True
        return grew


def follow(
    files: Callable[[], list[Path]],
    finished: Callable[[], bool],
    follower: Follower,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    state_poll: float = STATE_POLL,
) -> None:
    """Print new bytes until the job has finished and the files stopped growing (SETTLE quiet polls).

    The files are read every POLL seconds; whether the job ended is asked only while they are quiet and at most
    every `state_poll` seconds (STATE_POLL for slurmctld; a local job's runner is cheap to look at), so a follower
    costs the controller almost nothing (scontrol talks to slurmctld on every call; many users following logs would
    otherwise load it like a busy scheduler)."""
    quiet = 0
    ended = False
    asked = -state_poll
    while True:
        grew = follower.poll(files())
        if grew:
            quiet = 0
        elif not ended and clock() - asked >= state_poll:
            asked = clock()
            ended = finished()
        if not grew and ended:
            quiet += 1
            if quiet >= SETTLE:
                return
        sleep(POLL)


def check_node_name(node: str) -> str:
    if not node or "/" in node or node.startswith("."):
        raise UsageError(f"not a node name: {node!r}")
    return node
