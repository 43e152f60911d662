"""What slurmgen's own machinery costs as a job grows: file-system operations and CPU, measured on its real code
paths with simulated ranks and nodes, fitted to a growth exponent and extrapolated to 16,384 ranks.

    python bench/scale.py [--ranks 8 64 512 4096] [--per-node 8]

Each simulated node is a directory of its own (what /dev/shm is on a real node) and the job's log directory
stands in for the shared file system. Operations are counted in this process: the audit events of opens and
directory reads (sys.addaudithook), plus os.stat and os.pwrite, which raise none, wrapped for the run; each is
put on the shared file system when its path is in the log directory. "meta" counts opens, stats and directory
reads (the metadata server's work); "write" counts writes through a descriptor already open (data, no lookup).

Rows:
- watchdog (before): every supervisor lists the log directory and progress/ and stats every rank's log and mark
  once a poll (the code as it was, kept here to compare; 5 s poll at a 10-minute hang timeout);
- watchdog: the supervisors of every node polling for 20 s while every rank progresses (task/node_watch.py);
- watchdog, idle node: the same while the node's ranks wait (a barrier) and other nodes progress;
- progress marks (before / now): every rank's `Preemption.should_stop()` mark for 10 s of training;
- checkpoint watch: the watch on the program's own checkpoint (task/checkpoint_watch.py) for 20 s, one stat a
  poll in rank 0's supervisor alone, whatever the job's size; on a directory of sharded saves (one file per rank
  in each), one listing of its top and one stat per save kept there: flat in ranks too;
- hang: per hang, every rank's stacks file and hang event, then the batch shell's decision (history read,
  the ranks that stopped first, the steps lost);
- crash: per failure, the batch shell's reading of who failed first among N task exits;
- node check: parsing one verdict line per node (the batch shell's node check); hostlist: expanding the node list;
- logs --rank: finding one rank's log among N (jobs/logs.py);
- remote status: one poll of a job's state on a cluster: its script's store trust checks and record read, run by
  bash here with Slurm's commands stubbed (strace counts its file system calls in the log directory), and this
  side's read of sacct by the version it printed (backends/slurm_ssh/remote_status.py). The snapshot's manifest is
  made per submission, not per poll (bench/remote.py times a submit).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurmgen import contract, run_history  # noqa: E402
from slurmgen.job_context.context import JobContext  # noqa: E402
from slurmgen.progress_mark import ProgressMark, node_dir, node_mark_path, write_node_file  # noqa: E402
from slurmgen.task import checkpoint_watch  # noqa: E402
from slurmgen.task.checkpoint_watch import Watch, look_at  # noqa: E402
from slurmgen.task.node_watch import NodeWatch  # noqa: E402

HANG_TIMEOUT = 600.0
POLL = 5.0  # the watchdog's poll at that timeout (task/node_watch.poll_interval)
TARGET_RANKS = 16384


@dataclass
class Counter:
    shared: str = ""
    on: bool = False
    meta: int = 0
    write: int = 0
    local: int = 0
    seen: list[str] = field(default_factory=list)

    def note(self, kind: str, path: object) -> None:
        if not self.on:
            return
        if isinstance(path, int | bytes) or not str(path).startswith(self.shared):
            self.local += 1
        elif kind == "write":
            self.write += 1
        else:
            self.meta += 1


COUNT = Counter()
AUDITED = ("open", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.utime", "os.mkdir")


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event in AUDITED and COUNT.on:
        COUNT.note("meta", args[0])


_real_stat, _real_pwrite = os.stat, os.pwrite
_fd_paths: dict[int, str] = {}


def _stat(path: str, *, dir_fd: int | None = None, follow_symlinks: bool = True) -> os.stat_result:
    COUNT.note("meta", path)
    return _real_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)


def _pwrite(fd: int, data: bytes, offset: int) -> int:
    COUNT.note("write", _fd_paths.get(fd) or os.readlink(f"/proc/self/fd/{fd}"))
    return _real_pwrite(fd, data, offset)


@contextlib.contextmanager
def counting(shared: str) -> Iterator[Counter]:
    COUNT.shared, COUNT.meta, COUNT.write, COUNT.local, COUNT.on = shared, 0, 0, 0, True
    os.stat, os.pwrite = _stat, _pwrite  # type: ignore[assignment]
    try:
        yield COUNT
    finally:
        COUNT.on = False
        os.stat, os.pwrite = _real_stat, _real_pwrite


@dataclass
class Row:
    name: str
    unit: str  # "/s" (steady state) or "/event"
    meta: dict[int, float] = field(default_factory=dict)
    write: dict[int, float] = field(default_factory=dict)
    cpu: dict[int, float] = field(default_factory=dict)  # seconds of the one process that decides, per event


def env_of(log: str, node: int, local: int, per_node: int, nodes: int) -> dict[str, str]:
    first = node * per_node
    return {contract.LOG_DIR: log, contract.HANG_TIMEOUT: str(int(HANG_TIMEOUT)), "SLURMD_NODENAME": f"n{node:05d}",
            "SLURM_LOCALID": str(local), "SLURM_PROCID": str(first + local), "SLURM_NTASKS": str(nodes * per_node),
            "SLURM_NODEID": str(node), "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x{nodes})",
            "SLURM_STEP_NODELIST": f"n[00000-{nodes - 1:05d}]"}  # fmt: skip


def old_last_progress(log_dir: str, since: float) -> float:
    """task/watchdog.py's last_progress before the node-local marks and the shared heartbeat: every rank's log and
    mark, read from the shared log directory by every supervisor."""
    newest = since
    for folder in (log_dir, os.path.join(log_dir, "progress")):
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith("rank-"):
                    with contextlib.suppress(OSError):
                        newest = max(newest, os.stat(entry.path).st_mtime)  # DirEntry.stat is a stat(2) too
    return newest


def cpu(what: Callable[[], object]) -> float:
    start = time.process_time()
    what()
    return time.process_time() - start


def measure(ranks: int, per_node: int, rows: dict[str, Row], work: str) -> None:
    nodes = max(1, ranks // per_node)
    log = os.path.join(work, f"job-{ranks}")
    os.makedirs(os.path.join(log, "progress"))
    envs = [[env_of(log, n, i, per_node, nodes) for i in range(per_node)] for n in range(nodes)]
    now = time.time()
    for rank in range(ranks):
        Path(log, contract.rank_log_name(rank)).write_text("step 1\n")
        Path(log, "progress", f"rank-{rank}").write_text("1\n")

    def row(name: str, unit: str) -> Row:
        return rows.setdefault(name, Row(name, unit))

    # The watchdog as it was: one poll of one supervisor, times every supervisor, per second.
    with counting(log) as c:
        old_last_progress(log, now - 100)
    row("watchdog (before)", "/s").meta[ranks] = c.meta * ranks / POLL

    # The watchdog now: every supervisor of every node, 4 polls (20 s) while every rank progresses.
    for n, node_envs in enumerate(envs):
        for i, env in enumerate(node_envs):
            write_node_file(node_mark_path(JobContext.from_environ(env), n * per_node + i), "1\n")
    watches = [NodeWatch(JobContext.from_environ(env), n * per_node + i, 0, now - 10, HANG_TIMEOUT)
               for n, node_envs in enumerate(envs) for i, env in enumerate(node_envs)]  # fmt: skip
    with counting(log) as c:
        for poll in range(1, 5):
            at = now + poll * POLL
            for n, node_envs in enumerate(envs):
                with contextlib.suppress(OSError):
                    os.utime(
                        node_mark_path(JobContext.from_environ(node_envs[0]), n * per_node), (at, at)
                    )  # the node's ranks progress
            for w in watches:
                w.newest(at)
    row("watchdog", "/s").meta[ranks], row("watchdog", "/s").write[ranks] = c.meta / 20, c.write / 20

    # An idle node (its ranks wait while others progress): it reads the heartbeat once a period.
    idle = NodeWatch(JobContext.from_environ(envs[0][0]), 0, 0, now - 10, HANG_TIMEOUT)
    shutil.rmtree(node_dir(JobContext.from_environ(envs[0][0])), ignore_errors=True)
    with counting(log) as c:
        for poll in range(1, 5):
            idle.newest(now + 5 * HANG_TIMEOUT + poll * POLL)  # past the start-up limit
    row("watchdog, idle node", "/s").meta[ranks] = c.meta / 20 * nodes  # every node idle at once: the worst case

    # Progress marks, before: every rank rewrote progress/rank-<N> once a second.
    with counting(log) as c:
        for rank in range(ranks):
            with open(os.path.join(log, "progress", f"rank-{rank}"), "w") as handle:
                handle.write("2\n")
    row("progress marks (before)", "/s").meta[ranks] = c.meta
    # Now: 10 s of marks of every rank (the node's first rank rewrites its shared mark in place every 10 s).
    marks = [
        ProgressMark(JobContext.from_environ(env), n * per_node + i)
        for n, node_envs in enumerate(envs)
        for i, env in enumerate(node_envs)
    ]
    for m in marks:
        m.touch(1)  # opens the shared descriptor once, at the first mark
    with counting(log) as c:
        for _second in range(10):
            for m in marks:
                m.last -= 1.0
                m.shared_last -= 1.0
                m.touch(2)
    row("progress marks", "/s").meta[ranks], row("progress marks", "/s").write[ranks] = c.meta / 10, c.write / 10
    for m in marks:
        if m._fd is not None:
            os.close(m._fd)

    # The watch on the program's own checkpoint (spec field checkpoint.path): every task's supervisor asks whether
    # it watches (rank 0's alone does), then 20 s of polls, while the program saves every 5 s.
    ckpt = os.path.join(log, "ckpt.pt")
    Path(ckpt).write_bytes(b"0")
    watching = [Watch(look_at(ckpt)) for n, node_envs in enumerate(envs) for i, env in enumerate(node_envs)
                if checkpoint_watch.watches(JobContext.from_environ({**env, contract.CHECKPOINT: ckpt}),
                                            n * per_node + i)]  # fmt: skip
    with counting(log) as c:
        for poll in range(1, int(20 / checkpoint_watch.POLL) + 1):
            at = now + poll * checkpoint_watch.POLL
            if poll % 5 == 0:  # the program's save, not the watch's doing: not counted
                c.on = False
                os.utime(ckpt, (at, at))
                c.on = True
            for saves in watching:
                saves.see(look_at(ckpt), at + 1.0)
    row("checkpoint watch", "/s").meta[ranks] = c.meta / 20
    # The same on a directory of sharded saves (a checkpoint.path such as `ckpts/`): three kept saves at the top,
    # each a directory of one file per rank, and a new one every 5 s. Its top is listed and its entries stated.
    top = os.path.join(log, "ckpts")
    for kept in range(3):
        os.makedirs(os.path.join(top, f"step-{kept}"))
        for rank in range(ranks):
            Path(top, f"step-{kept}", f"__{rank}_0.distcp").write_bytes(b"0")
    sharded = Watch(look_at(top))
    with counting(log) as c:
        for poll in range(1, int(20 / checkpoint_watch.POLL) + 1):
            at = now + poll * checkpoint_watch.POLL
            if poll % 5 == 0:
                c.on = False
                shutil.rmtree(os.path.join(top, f"step-{poll // 5 - 1}"))
                os.makedirs(os.path.join(top, f"step-{poll // 5 + 2}"))
                for rank in range(ranks):
                    Path(top, f"step-{poll // 5 + 2}", f"__{rank}_0.distcp").write_bytes(b"0")
                c.on = True
            sharded.see(look_at(top), at + 1.0)
    row("checkpoint watch, a directory of sharded saves", "/s").meta[ranks] = c.meta / 20

    # A hang: every rank's stacks file and hang event (one history file per node), then the batch shell decides.
    os.makedirs(os.path.join(log, "hang"))
    with counting(log) as c:
        for rank in range(ranks):
            with open(os.path.join(log, "hang", f"rank-{rank}.stacks"), "a") as out:
                out.write("Thread 1 (idle): MainThread\n    wait (x.py:1)\n")
            node = f"n{rank // per_node:05d}"
            run_history.append(log, f"node-{node}", run_history.HANG, 1, now, rank=rank, node=node,
                               progressed=now - 600 + rank % 7, stacks="x")  # fmt: skip
    ranks_meta = c.meta
    from slurmgen.batch import restart

    def decide() -> None:
        history = run_history.History.load(log)
        restart.hang_events(history, 1, now - 1)
        restart.steps_lost(log, history, 1, now - 1000)

    with counting(log) as c:
        seconds = cpu(decide)
    row("hang: every rank's stacks and event", "/event").meta[ranks] = ranks_meta
    hang = row("hang: the batch shell's decision", "/event")
    hang.meta[ranks], hang.cpu[ranks] = c.meta, seconds

    # A crash: N task exits (one cause, the rest casualties), the batch shell finds who failed first.
    from slurmgen.batch import task_failure

    events = [{"v": 1, "event": run_history.TASK_EXIT, "run": 2, "time": now + r * 1e-4, "by": "x", "rank": r,
               "node": f"n{r // per_node}", "exit_code": 1 if r == 3 else 76} for r in range(ranks)]  # fmt: skip
    row("crash: who failed first", "/event").cpu[ranks] = cpu(lambda: task_failure.first_failure(events, 2))

    # The node check's verdicts, one line per node; the node list.
    from slurmgen.slurm.hostlist import expand_hostlist

    lines = "\n".join(json.dumps({"node": f"n{n:05d}", "ok": True, "reason": ""}) for n in range(nodes))
    row("node check: parse verdicts", "/event").cpu[ranks] = cpu(lambda: [json.loads(x) for x in lines.splitlines()])
    row("hostlist: expand", "/event").cpu[ranks] = cpu(lambda: expand_hostlist(f"n[00000-{nodes - 1:05d}]"))

    # slurmgen logs --rank R: the one file, without opening the others.
    from slurmgen.queries import logs

    batch_log = Path(work, f"job-{ranks}.log")
    batch_log.write_text("")
    with counting(log) as c:
        seconds = cpu(lambda: logs.select([batch_log], None, ranks - 1))
    row("logs --rank", "/event").meta[ranks], row("logs --rank", "/event").cpu[ranks] = c.meta, seconds

    # One poll of remote status (`slurmgen status/wait` of a job on a cluster: backends/slurm_ssh/remote_status.py):
    # its script, run here by bash with Slurm's commands stubbed, makes the store trust checks (sg_own of the log
    # directory, its history/ and the batch shell's record) and reads the record; then this side reads sacct by the
    # version it printed. Counted by strace (file system calls naming the log directory; commands started).
    polled = remote_status_poll(log, ranks, nodes)
    if polled is not None:
        status_row = row("remote status: one poll (trust checks, record, sacct by version)", "/poll")
        status_row.meta[ranks], status_row.cpu[ranks] = polled
    shutil.rmtree(log)
    for node_envs in envs:
        shutil.rmtree(node_dir(JobContext.from_environ(node_envs[0])), ignore_errors=True)


SLURM_STUBS = (
    "squeue() { :; }\n"  # lists nothing: the job has ended, so sacct and scontrol are asked too
    "sacct() { case \"$1\" in --version) echo 'slurm 24.11.1';; *) echo '1|COMPLETED|0:0';; esac; }\n"
    "scontrol() { :; }\n"
)


def remote_status_poll(log: str, ranks: int, nodes: int) -> tuple[float, float] | None:
    """One poll of remote status for a job of ``ranks`` ranks on ``nodes`` nodes whose logs are in ``log``: the
    file system calls its script makes in the log directory (meta, as the other rows count them), and this side's
    CPU reading the answer (sacct's rows by the version it printed). None without strace."""
    import subprocess

    from slurmgen.backends.slurm_ssh.remote_status import decide, status_script

    strace = shutil.which("strace")
    if strace is None:
        return None
    history = Path(log, "history")
    history.mkdir(exist_ok=True)
    with open(history / "batch-shell.jsonl", "w") as out:  # a run's record, as the batch shell writes it
        out.write(json.dumps({"v": 1, "event": "run-start", "run": 1, "time": 1.0, "by": "batch-shell"}) + "\n")
        out.write(json.dumps({"v": 1, "event": "run-end", "run": 1, "time": 2.0, "by": "batch-shell",
                              "exit_code": 0, "ended": "completed"}) + "\n")  # fmt: skip
    for n in range(nodes):  # every node's own history file beside it, which the poll must not read
        (history / f"node-n{n:05d}.jsonl").write_text("{}\n")
    script = SLURM_STUBS + status_script(["1"], {"1": log})
    trace = Path(log + ".strace")
    done = subprocess.run([strace, "-f", "-qq", "-e", "trace=%file,%desc", "-o", str(trace), "bash", "-c", script],
                          capture_output=True, check=False)  # fmt: skip
    calls = [line for line in trace.read_text(errors="replace").splitlines() if f'"{log}' in line]
    trace.unlink()
    text = done.stdout.decode(errors="replace")
    assert "@@slurmgen-section record 1" in text and "run-end" in text, text  # the record was read and trusted
    return float(len(calls)), cpu(lambda: decide(["1"], text))


def exponent(points: dict[int, float]) -> float | None:
    """Least-squares slope of log(value) on log(ranks), over the points above noise."""
    xs = [(math.log(n), math.log(v)) for n, v in sorted(points.items()) if v > 1e-4]
    if len(xs) < 2:
        return None
    mx, my = sum(x for x, _ in xs) / len(xs), sum(y for _, y in xs) / len(xs)
    den = sum((x - mx) ** 2 for x, _ in xs)
    return sum((x - mx) * (y - my) for x, y in xs) / den if den else None


def at_target(points: dict[int, float]) -> float | None:
    if not points:
        return None
    top = max(points)
    k = exponent(points)
    return float(points[top] * (TARGET_RANKS / top) ** (k if k is not None else 0.0))


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 1e5 else f"{value:.2e}"


def table(rows: dict[str, Row], per_node: int, sizes: list[int]) -> str:
    nodes_at = TARGET_RANKS // per_node
    out = [f"| operation | unit | shared FS meta ops at {' / '.join(map(str, sizes))} ranks | exponent | "
           f"at {TARGET_RANKS} ranks | per node per 10 s at {nodes_at} nodes | shared writes at {TARGET_RANKS} | "
           f"CPU per event, exponent, at {TARGET_RANKS} |",
           "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows.values():
        meta = " / ".join(fmt(r.meta[n]) for n in sorted(r.meta)) or "-"
        target = at_target(r.meta)
        per_node10 = None if target is None or r.unit != "/s" else target / nodes_at * 10
        cpu_cell = "-"
        if r.cpu:
            cpu_cell = f"{fmt(r.cpu[max(r.cpu)])} s, {fmt(exponent(r.cpu), 2)}, {fmt(at_target(r.cpu))} s"
        out.append(f"| {r.name} | {r.unit} | {meta} | {fmt(exponent(r.meta), 2)} | {fmt(target)} | {fmt(per_node10)} | "
                   f"{fmt(at_target(r.write))} | {cpu_cell} |")  # fmt: skip
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 512, 4096])
    parser.add_argument("--per-node", type=int, default=8)
    args = parser.parse_args()
    sys.addaudithook(_hook)
    rows: dict[str, Row] = {}
    work = tempfile.mkdtemp(prefix="slurmgen-scale-")
    try:
        for ranks in args.ranks:
            started = time.monotonic()
            measure(ranks, args.per_node, rows, work)
            print(f"{ranks} ranks measured in {time.monotonic() - started:.1f} s", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(table(rows, args.per_node, sorted(args.ranks)))


if __name__ == "__main__":
    main()
