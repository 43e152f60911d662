"""A scenario on the local emulator: its spec, its `slurmgen run` command line with the rehearsal options, the acts
by hand (requeue, cancel then resume) once rank 0 reached a step, and the Observation of the ended job. Every
scenario runs in its own directory (its own journal, log directory and rendezvous port)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from scenarios.axes import Scenario
from scenarios.observation import Observation
from slurmgen import run_history

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent.parent
PROGRAM = Path(__file__).resolve().parent / "program.py"
LIGHTNING = Path(__file__).resolve().parent / "program_lightning.py"  # the framework shape
STEP_TIME = 0.1
SAVE_EVERY = 10
# 6 s of steps: the rehearsals come at a step of rank 0's program (--at-step, --preempt-at-step; at most 30, plus the
# second by which its progress mark may lag: 10 steps), so the window no longer has to cover a loaded start-up
STEADY_STEPS = 60
LIMIT_STEPS = 240  # with a step of 0.5 s: longer than the first run, signalled 30 s before its two-minute limit
STEERING = ("SLURM_", "SLURMGEN_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_", "TORCHELASTIC_")


@dataclass(frozen=True)
class Plan:
    spec: str
    args: list[str]  # after `slurmgen run job.yaml`
    steps: int
    step_time: float

    def reproduction(self) -> str:
        """The one-line reproduction: the command line plus the spec, as one shell line."""
        lines = shlex.join(self.spec.splitlines())
        return f"printf '%s\\n' {lines} > job.yaml && slurmgen run job.yaml {shlex.join(self.args)}".rstrip()


def plan(s: Scenario, where: Path) -> Plan:
    kinds = s.kinds()
    limit = "time_limit" in kinds
    steps, step_time = (LIMIT_STEPS, 0.5) if limit else (STEADY_STEPS, STEP_TIME)
    save_every = 1 if "preempt_save" in kinds else SAVE_EVERY
    program = [str(LIGHTNING)] if s.shape == "lightning" else [str(PROGRAM), "--shape", s.shape]
    state = where / ("lightning-checkpoints" if s.shape == "lightning" else "own-state.json")
    command = [PY, *program, "--steps", str(steps), "--step-time", str(step_time), "--save-every", str(save_every),
               "--state", str(state)]  # fmt: skip
    args: list[str] = []
    for i in s.interruptions:
        # timed by rank 0's progress, not the clock: a loaded machine starts the programs late, and a second would
        # land before the first step or in another phase
        if i.kind in ("crash", "preempt_restart"):
            args += ["--kill-rank", str(i.rank), "--at-step", str(int(i.at))]
        if i.kind == "preempt_restart":
            # counted from the restarted program's marks (the killed one's are older): it comes at the restarted
            # program's first marked step, while the step restarts
            args += ["--preempt-at-step", str(int(i.at) + 2)]
        if i.kind == "hang":
            args += ["--hang-rank", str(i.rank), "--at-step", str(int(i.at))]
        if i.kind == "preempt_first":
            args += ["--preempt-after", "1"]  # before any step: its start-up takes longer than a second
        if i.kind == "preempt_save":
            args += ["--preempt-at-step", str(int(i.at))]
        if i.kind == "bad_node":
            args += ["--bad-node", "2"]
        if i.kind in ("crash_late", "bug"):
            command += ["--fail-rank", str(i.rank), "--fail-at", str(int(i.at))]
            if i.kind == "crash_late":
                command += ["--linger", "3", "--fail-once", str(where / "failed-once")]
    port = 20000 + zlib.crc32(str(where).encode()) % 9000
    if s.recovery:
        recovery = "{hang_timeout: 20, health_check: 'true'}" if {"hang", "bad_node"} & set(kinds) else "{}"
    else:
        recovery = "false"
    # torchrun runs one task per node, which starts nproc_per_node workers (docs/spec.md, Launchers)
    ranks_per_node = "nproc_per_node" if s.launcher == "torchrun" else "tasks_per_node"
    # the own shape knows nothing of slurmgen: its step, for a rehearsal timed by it, is read from its output
    steps_timed = any(a in ("--at-step", "--preempt-at-step") for a in args)
    progress = "progress: {pattern: '^STEP (\\d+)$'}\n" if s.shape == "own" and steps_timed else ""
    # Lightning's own periodic saves (ModelCheckpoint) are the program's: watched, as a user who wants them
    # counted writes it, so the work a crash loses is counted back to them
    if s.shape == "lightning":
        progress += f"checkpoint: {{path: {state}}}\n"
    spec = (
        f"name: scen\ncommand: {json.dumps(command)}\ntime: '{'00:02:00' if limit else '00:10:00'}'\n"
        f"nodes: {s.nodes}\n{ranks_per_node}: {s.tasks}\nlauncher: {s.launcher}\npython: {PY}\n"
        f"distributed: {{port: {port}}}\npreemption: {{handler: {s.handler}, lead_time: {30 if limit else 120}}}\n"
        + ("" if "recovery:" in s.extra else f"recovery: {recovery}\n")
        + progress
        + s.extra
    )
    return Plan(spec=spec, args=args, steps=steps, step_time=step_time)


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(STEERING)}
    # the jobs' python imports this tree's slurmgen, as the tests' interpreter does
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env["PYTHONWARNINGS"] = "ignore"
    return env


def slurmgen(where: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "slurmgen", *args], cwd=where, env=environment(), capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


def rank0_reached(where: Path, step: int) -> bool:
    log = where / "logs" / "scen-1" / "rank-0.log"
    return log.exists() and f"STEP {step}\n" in log.read_text(errors="replace")


def run(s: Scenario, where: Path, timeout: float = 400) -> tuple[Plan, Observation]:
    """Run the scenario to its end and observe what it left."""
    p = plan(s, where)
    (where / "job.yaml").write_text(p.spec)
    deadline = time.monotonic() + timeout
    with open(where / "runner.err", "wb") as err:
        proc = subprocess.Popen([PY, "-m", "slurmgen", "run", "job.yaml", *p.args], cwd=where, env=environment(),
                                stderr=err, stdout=subprocess.DEVNULL)  # fmt: skip
        try:
            for i in s.interruptions:
                if i.kind in ("requeue", "cancel_resume"):
                    while proc.poll() is None and not rank0_reached(where, int(i.at)) and time.monotonic() < deadline:
                        time.sleep(0.2)
                    if proc.poll() is None:
                        acted = slurmgen(where, "requeue" if i.kind == "requeue" else "cancel", "local-1")
                        (where / f"{i.kind}.err").write_text(acted.stdout + acted.stderr)
            code = proc.wait(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    runner = (where / "runner.err").read_text(errors="replace")
    if "cancel_resume" in s.kinds():
        resumed = slurmgen(where, "resume", "local-1", timeout=max(deadline - time.monotonic(), 1))
        runner += resumed.stderr
        code = resumed.returncode
    return p, observe(where, runner, code)


JOB_FACTS = (
    "import json, slurmgen\n"
    "j = slurmgen.Job('local-1')\n"
    "print(json.dumps({'state': j.state(), 'exit_code': j.exit_code, 'restarts': j.restarts(),"
    " 'history': j.history()}, default=str))\n"
)


def observe(where: Path, runner: str, code: int) -> Observation:
    report = slurmgen(where, "report", "local-1", "--json")
    facts = subprocess.run([PY, "-c", JOB_FACTS], cwd=where, env=environment(), capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
    journal = where / ".slurmgen" / "local" / "journal.jsonl"
    jobs = {json.loads(line)["job_id"] for line in journal.read_text().splitlines()} if journal.exists() else set()
    views = {view: slurmgen(where, view, "local-1").stdout for view in ("status", "history")}
    return left_behind(where, where / "logs", "scen-1", runner, code, views, report, facts, len(jobs))


def left_behind(where: Path, output: Path, prefix: str, runner: str, code: int, views: dict[str, str],
                report: subprocess.CompletedProcess[str], facts: subprocess.CompletedProcess[str],
                jobs: int) -> Observation:  # fmt: skip
    """The Observation of an ended job whose logs are under ``output`` (`<prefix>.log`, `<prefix>/`), from its
    runner's lines and code, `status` and `history` (``views``), `report --json`, JOB_FACTS' answer and the
    jobs its journal holds; the rest is read from the files and what is left on this machine. Any place's."""
    logs = output / prefix
    ranks = {int(m[1]): f.read_text(errors="replace") for f in logs.glob("rank-*.log")
             if (m := re.fullmatch(r"rank-(\d+)\.log", f.name))}  # fmt: skip
    batch = output / f"{prefix}.log"
    state_dir = output / "state"
    key = zlib.crc32(os.path.abspath(logs).encode())
    return Observation(
        runner=runner,
        exit_code=code,
        ranks=ranks,
        batch=batch.read_text(errors="replace") if batch.exists() else "",
        events=run_history.read(str(logs)) if logs.exists() else [],
        status=views["status"],
        history=views["history"],
        report=json.loads(report.stdout) if report.returncode == 0 else {"error": report.stderr},
        job=json.loads(facts.stdout) if facts.returncode == 0 else {"error": facts.stderr},
        state_files=sorted(f.name for f in state_dir.iterdir()) if state_dir.exists() else [],
        processes=processes_under(where),
        shm=sorted(d for d in os.listdir("/dev/shm") if d.startswith(f"slurmgen-{os.getuid()}-{key:08x}-"))
        if os.path.isdir("/dev/shm")
        else [],
        jobs=jobs,
    )


def processes_under(where: Path) -> list[str]:
    """Processes whose command line names the scenario's directory (the program's --state does), a moment after
    the runner's end: a rank still alive then is a leftover."""
    time.sleep(0.5)
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(where) in cmdline and int(pid) != os.getpid():
            left.append(f"{pid} {cmdline.strip()}")
    return left
