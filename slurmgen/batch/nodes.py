"""The batch shell's node checks: before every start of the step, check every node and keep a bad one out.

    python3 -m slurmgen.batch.nodes NODES GPUS ATTEMPT
        # prints the nodes the step starts on (a comma list); exit 0: start it there, 3: the job was requeued away
        # from a bad node, 4: not enough healthy nodes and no requeue: the run ends (exit_codes.NODES_*); any other
        # exit is the check's own failure: the batch shell starts the step on the allocation's nodes

The checks run on all nodes at once, as one job step (`srun --nodes=K --ntasks-per-node=1 --nodelist=...`): one
launch for the whole allocation costs about what one node's would, and Slurm starts it where the step will run,
under the same limits (batch/node_check.py: the GPUs, the state directory, the user's `recovery.health_check`).
Each node prints its verdict; a node that prints none while others did, within the step's time limit, failed
(it hangs, or cannot be reached). A check step that gives no verdict at all blames no node: that is no evidence
against any one of them (it is said, and the step starts on the nodes as before).

After a failed start of the step (ATTEMPT above 0), Slurm's own view of the nodes is evidence too: a node of the
allocation that `scontrol show node` shows DOWN, DRAIN, FAIL or NOT_RESPONDING is excluded (with sbatch
--no-kill, which the script asks for when there are spares, Slurm keeps the job when one of its nodes fails).
Which nodes the step starts on is slurmgen.interruption.decide_nodes. Without a spare left the job is requeued
with every bad node added to its ExcNodeList. `scontrol update ExcNodeList` needs a pending job ("Job is no
longer pending execution" while it runs, src/slurmctld/job_mgr.c), so the order is: `scontrol requeue
Incomplete` (the job turns PENDING at once, COMPLETING until its processes have ended, so it cannot start
again before the update), then `scontrol update JobId=<job> ExcNodeList=<old + bad>`, with SIGTERM ignored
meanwhile: the requeue sends it to every process of the job, and this one must live for the update (Slurm sends
SIGKILL only KillWait seconds later). Measured on Slurm 22.05: the update is taken, and the next run starts on
the other nodes. Every excluded node is recorded in the run history (event `node-excluded`: node, reason).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from slurmgen import contract, exit_codes, run_history
from slurmgen.job_context.context import JobContext

WRITER = "batch-shell"
CHECK_TIMEOUT = 60.0  # seconds per check on a node (SLURMGEN_NODE_CHECK_TIMEOUT overrides)
STEP_START = 30.0  # seconds for Slurm to start the check step, on top of the checks
BAD_STATES = ("DOWN", "DRAIN", "FAIL", "NOT_RESPONDING")


def _say(line: str) -> None:
    print(f"slurmgen: {line}", file=sys.stderr, flush=True)


def checkpoint_bytes(ctx: JobContext, history: run_history.History) -> int:
    """Bytes of the newest complete checkpoint of this job (the checkpoint layout), else of its last recorded
    save; 0 when nothing was saved."""
    from slurmgen.runtime.checkpoint import layout  # standard library only (the batch package's rule)

    state_dir, key = ctx.state_dir, ctx.key
    if state_dir and key:
        name = f"{key}.state"
        found: list[tuple[float, str]] = []
        for _seq, path in layout.complete_dirs(state_dir, name):
            with contextlib.suppress(OSError):  # gone since it was listed
                found.append((os.lstat(os.path.join(path, layout.MARKER)).st_mtime, path))
        with contextlib.suppress(OSError):
            found.append((os.lstat(os.path.join(state_dir, name)).st_mtime, os.path.join(state_dir, name)))
        for _mtime, path in sorted(found, reverse=True):  # the newest first
            try:
                return layout.tree_size(path) if os.path.isdir(path) else os.stat(path).st_size
            except OSError:
                continue
    saves = [int(e.get("bytes") or 0) for e in history.all(run_history.SAVE)]
    return saves[-1] if saves else 0


def check_step(
    hosts: Sequence[str], gpus: int, ctx: JobContext, need: int, timeout: float
) -> tuple[dict[str, str], bool]:
    """Run the checks on ``hosts``: (failed node -> reason, whether any node answered)."""
    # --ntasks: srun would take SLURM_NTASKS, the whole allocation's, when the check runs on fewer nodes.
    words = ["srun", f"--nodes={len(hosts)}", f"--ntasks={len(hosts)}", "--ntasks-per-node=1"]
    words += [f"--nodelist={','.join(hosts)}"]
    words += ["--kill-on-bad-exit=0"] + ([f"--gpus-per-node={gpus}"] if gpus > 0 else [])
    words += [sys.executable, "-m", contract.NODE_CHECK_ENTRY, f"--gpus={gpus}", f"--need={need}"]
    words += [f"--state-dir={ctx.state_dir or ''}", f"--timeout={timeout:g}"]
    health = ctx.health_check
    if health:
        words += ["--", *shlex.split(health)]
    limit = 3 * timeout + STEP_START
    proc = subprocess.Popen(words, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
    verdicts: dict[str, dict[str, Any]] = {}
    for line in out.splitlines():
        try:
            got = json.loads(line)
        except ValueError:
            continue
        if isinstance(got, dict) and got.get("node") in hosts:
            verdicts[str(got["node"])] = got
    if not verdicts:
        said = err.strip().splitlines()
        _say(f"the node check gave no verdict ({said[-1] if said else f'exit {proc.returncode}'}): no node is blamed")
        return {}, False
    failed = {n: str(v.get("reason") or "check failed") for n, v in verdicts.items() if not v.get("ok")}
    for node in hosts:
        if node not in verdicts:
            failed[node] = f"no verdict from the node check within {limit:g} s"
    return failed, True


def _kill(proc: subprocess.Popen[str]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=5)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _scontrol(argv: Sequence[str]) -> str:
    """scontrol's output; "" when it failed, timed out or is missing (no evidence either way)."""
    done = _call(argv)
    return done[1] if done[0] == 0 else ""


def _call(argv: Sequence[str]) -> tuple[int, str, str]:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=10.0, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return -1, "", str(exc)
    return done.returncode, done.stdout, done.stderr


def down_nodes(hosts: Sequence[str], run: Callable[[Sequence[str]], str] | None = None) -> dict[str, str]:
    """The nodes Slurm shows DOWN, DRAIN, FAIL or NOT_RESPONDING (a trailing `*`), with their state; {} when Slurm
    cannot be asked (no evidence)."""
    text = (run or _scontrol)(["scontrol", "-o", "show", "node", ",".join(hosts)])
    found = {}
    for line in text.splitlines():
        name, state = re.search(r"NodeName=(\S+)", line), re.search(r"\bState=(\S+)", line)
        if name is None or state is None or name.group(1) not in hosts:
            continue
        words = state.group(1).rstrip("*").split("+")
        if state.group(1).endswith("*") or any(w in BAD_STATES for w in words):
            found[name.group(1)] = f"Slurm shows it {state.group(1)}"
    return found


def requeue_away(key: str, away: Sequence[str], ctx: JobContext, say: Callable[[str], None]) -> bool:
    """Requeue the job and add ``away`` to its ExcNodeList; True when it was requeued."""
    from slurmgen.requeue import requeue_this_job
    from slurmgen.slurm.hostlist import expand_hostlist

    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the requeue sends SIGTERM to the job's processes
    old = re.search(r"\bExcNodeList=(\S+)", _scontrol(["scontrol", "-o", "show", "job", key]))
    kept = [] if old is None or old.group(1) == "(null)" else expand_hostlist(old.group(1))
    # The batch shell runs outside any container: it asks Slurm itself, never through a task's marker.
    outcome = requeue_this_job(run_history.BAD_NODE, dataclasses.replace(ctx, in_container=False), by=WRITER)
    say(outcome.message)
    if outcome.action != "requeued":
        return False
    nodes = ",".join(dict.fromkeys([*kept, *away]))
    error = ""
    for _ in range(10):
        code, _, error = _call(["scontrol", "update", f"JobId={key}", f"ExcNodeList={nodes}"])
        if code == 0:
            say(f"job {key} will not run on {nodes} again (ExcNodeList)")
            return True
        time.sleep(0.3)
    say(f"job {key} was requeued but its ExcNodeList could not be set ({error.strip()}); it may get the node again")
    return True


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    from slurmgen import interruption
    from slurmgen.interruption.allocation import NodeFacts
    from slurmgen.slurm.hostlist import expand_hostlist

    args = list(sys.argv[1:] if argv is None else argv)
    ctx = JobContext.from_environ(os.environ if env is None else env)  # read once
    needed, gpus, attempt = (int(a) for a in args[:3])
    hosts = expand_hostlist(ctx.nodes or "")
    log_dir, key, run = ctx.log_dir or "", ctx.key, ctx.run
    history = run_history.History.load(log_dir)  # one read for the whole decision
    excluded = {str(e.get("node")): str(e.get("reason")) for e in history.of_run(run, run_history.NODE_EXCLUDED)}
    failed = down_nodes([h for h in hosts if h not in excluded]) if attempt > 0 else {}
    left = [h for h in hosts if h not in excluded and h not in failed]
    timeout = ctx.node_check_timeout or CHECK_TIMEOUT
    if left:
        checked, _ = check_step(left, gpus, ctx, checkpoint_bytes(ctx, history), timeout)
        failed.update(checked)
    plan = interruption.decide(NodeFacts(tuple(hosts), needed, excluded, failed))
    if plan.line:
        _say(plan.line)
    for node, why in plan.exclude:
        if log_dir:
            run_history.append(log_dir, WRITER, run_history.NODE_EXCLUDED, run, time.time(), node=node, reason=why,
                               attempt=attempt, spare=bool(plan.run_on))  # fmt: skip
    if plan.run_on:
        print(",".join(plan.run_on), flush=True)
        return 0
    if key is not None and requeue_away(key, plan.requeue_excluding, ctx, _say):
        return exit_codes.NODES_REQUEUED
    return exit_codes.NODES_SHORT


if __name__ == "__main__":
    sys.exit(main())
