"""A scenario on the real test cluster: the same spec as on the local emulator (local_place.plan), submitted as a
user does (`slurmgen submit job.yaml --wait`), and each interruption done from outside as a site or a user would,
once rank 0 printed the scenario's step (Interruption.at, read as a step here: the program's progress, not the
clock, so a loaded machine cannot move it into another phase):

    crash            SIGKILL of rank R's program (found in /proc by its command line and RANK)
    hang             SIGSTOP of rank R's program, for the hang watchdog
    preempt_first    `scancel --batch --signal=USR1` as soon as the batch shell says run 1 started
    preempt_save     that signal at the step, into a program that saves every step
    preempt_restart  the SIGKILL at the step, then the signal as the batch log says the step restarts
    requeue          `slurmgen requeue JOB` at the step
    crash_late, bug  the program's own failure options, as on the emulator

The runner's outcome line is made from Slurm's own record of the ended job (state, exit code, Restarts + 1 runs),
so the invariants compare slurmgen's views with Slurm's, and the runner's exit code is `submit --wait`'s. What
only the emulator can rehearse (a bad node, the time limit) and a cancel-then-resume stay local (why_not_here)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scenarios import local_place
from scenarios.axes import Scenario
from scenarios.observation import Observation
from slurmgen import run_history

PY = local_place.PY
LOCAL_ONLY = ("bad_node", "time_limit", "cancel_resume")


def slurmgen(where: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "slurmgen", *args], cwd=where, env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def why_not_here(s: Scenario) -> str | None:
    """Why a scenario does not run on the cluster (None: it does)."""
    kinds = set(s.kinds())
    if kinds & set(LOCAL_ONLY):
        return f"{sorted(kinds & set(LOCAL_ONLY))[0]}: rehearsed on the local emulator only"
    return None


@dataclass(frozen=True)
class ClusterPlan(local_place.Plan):
    acts: tuple[str, ...] = ()  # what the engine does from outside, in words, for the reproduction

    def reproduction(self) -> str:
        lines = shlex.join(self.spec.splitlines())
        acts = "; ".join(self.acts)
        return f"printf '%s\\n' {lines} > job.yaml && slurmgen submit job.yaml --wait" + (f"  # then: {acts}" if acts
                                                                                        else "")  # fmt: skip


def plan(s: Scenario, where: Path) -> ClusterPlan:
    base = local_place.plan(s, where)
    acts = []
    for i in s.interruptions:
        at = f"at rank 0's STEP {int(i.at)}"
        acts += {
            "crash": [f"{at}: kill -KILL rank {i.rank}'s program"],
            "hang": [f"{at}: kill -STOP rank {i.rank}'s program"],
            "preempt_first": ["when run 1 starts: scancel --batch --signal=USR1 JOB"],
            "preempt_save": [f"{at}: scancel --batch --signal=USR1 JOB"],
            "preempt_restart": [f"{at}: kill -KILL rank {i.rank}'s program",
                                "as the step restarts: scancel --batch --signal=USR1 JOB"],  # fmt: skip
            "requeue": [f"{at}: slurmgen requeue JOB"],
        }.get(i.kind, [])
    return ClusterPlan(spec=base.spec, args=[], steps=base.steps, step_time=base.step_time, acts=tuple(acts))


def program_of(where: Path, rank: int) -> int | None:
    """The pid of rank ``rank``'s program (not its task supervisor nor torchrun's agent): its command line runs
    the scenario's program with this scenario's state file, and its environment says RANK=rank."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if len(argv) < 2 or os.fsdecode(argv[1]) != str(local_place.PROGRAM):
                continue
            if str(where).encode() not in b" ".join(argv):
                continue
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env:
            return int(pid)
    return None


class Acts:
    """The interruptions of one scenario, done in order from outside while its job runs."""

    def __init__(self, s: Scenario, where: Path, cluster: Any, job: str) -> None:
        self.s, self.where, self.cluster, self.job = s, where, cluster, job
        self.log = where / "logs" / f"scen-{job}" / "rank-0.log"
        self.batch = where / "logs" / f"scen-{job}.log"
        self.todo = list(s.interruptions)
        self.pending: list[str] = []  # a second act of one interruption, waiting for its moment
        self.missed: list[str] = []

    def text(self, path: Path) -> str:
        return path.read_text(errors="replace") if path.exists() else ""

    def reached(self, step: int) -> bool:
        return f"STEP {step}\n" in self.text(self.log)

    def signal_job(self) -> None:
        done = self.cluster.run(["scancel", "--batch", "--signal=USR1", self.job])
        assert done.returncode == 0, done.stderr

    def poll(self) -> None:
        """Do every act whose moment has come."""
        if self.pending and "restarting the step" in self.text(self.batch):
            self.pending.clear()
            self.signal_job()
        if not self.todo:
            return
        i = self.todo[0]
        if i.kind == "preempt_first":
            if re.search(r"run 1, started", self.text(self.batch)):
                self.todo.pop(0)
                self.signal_job()
            return
        if i.kind not in ("crash", "hang", "preempt_save", "preempt_restart", "requeue"):
            self.todo.pop(0)  # the program's own (bug, crash_late): nothing to do from outside
            return
        if not self.reached(int(i.at)):
            return
        self.todo.pop(0)
        if i.kind == "preempt_save":
            self.signal_job()
        elif i.kind == "requeue":
            done = slurmgen(self.where, {**local_place.environment(), **self.cluster.env}, "requeue", self.job)
            (self.where / "requeue.err").write_text(done.stdout + done.stderr)
        else:
            pid = program_of(self.where, i.rank)
            if pid is None:
                self.missed.append(f"{i.words()}: rank {i.rank}'s program was not running")
                return
            os.kill(pid, signal.SIGSTOP if i.kind == "hang" else signal.SIGKILL)
            if i.kind == "preempt_restart":
                self.pending.append("signal")


def run(s: Scenario, where: Path, cluster: Any, timeout: float = 400) -> tuple[ClusterPlan, Observation]:
    """Submit the scenario, do its acts, wait for its end and observe what it left."""
    p = plan(s, where)
    (where / "job.yaml").write_text(p.spec)
    env = {**local_place.environment(), **cluster.env}
    deadline = time.monotonic() + timeout
    with open(where / "runner.out", "w+") as out, open(where / "runner.err", "w") as err:
        proc = subprocess.Popen([PY, "-m", "slurmgen", "submit", "job.yaml", "--wait"], cwd=where, env=env,
                                stdout=out, stderr=err)  # fmt: skip
        job = ""
        acts: Acts | None = None
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                if not job and (found := re.match(r"(\d+)\s*$", Path(out.name).read_text())):
                    job = found[1]
                    acts = Acts(s, where, cluster, job)
                if acts is not None:
                    acts.poll()
                time.sleep(0.2)
            code = proc.wait(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    said = Path(out.name).read_text()
    job = job or (m[1] if (m := re.search(r"job=(\d+)", said)) else "")
    info = cluster.client.show_job(job) if job else None
    runner = Path(err.name).read_text(errors="replace")
    if acts is not None and acts.missed:
        runner += "".join(f"\nslurmgen scenario: {m}: never fired" for m in acts.missed)
    if info is not None and info.state.is_terminal:
        runner += f"\n{info.state.name}, exit code {info.exit_code or 0}, {info.restarts + 1} runs\n"
    return p, observe(where, job, runner, code, env)


JOB_FACTS = (
    "import json, sys, slurmgen\n"
    "j = slurmgen.Job(sys.argv[1])\n"
    "print(json.dumps({'state': j.state(), 'exit_code': j.exit_code, 'restarts': j.restarts(),"
    " 'history': j.history()}, default=str))\n"
)


def observe(where: Path, job: str, runner: str, code: int, env: dict[str, str]) -> Observation:
    logs = where / "logs" / f"scen-{job}"
    ranks = {int(m[1]): f.read_text(errors="replace") for f in logs.glob("rank-*.log")
             if (m := re.fullmatch(r"rank-(\d+)\.log", f.name))}  # fmt: skip
    batch = where / "logs" / f"scen-{job}.log"
    report = slurmgen(where, env, "report", job, "--json")
    facts = subprocess.run([PY, "-c", JOB_FACTS, job], cwd=where, env=env, capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
    journals = list((where / ".slurmgen").glob("**/journal.jsonl"))
    # a submission's journal says `submitting` (no id yet), then `submitted` with Slurm's id: the ids are the jobs
    records = [json.loads(line) for j in journals for line in j.read_text().splitlines() if line.strip()]
    jobs = {r["job_id"] for r in records if r.get("job_id")}
    state_dir = where / "logs" / "state"
    key = zlib.crc32(os.path.abspath(logs).encode())
    return Observation(
        runner=runner,
        exit_code=code,
        ranks=ranks,
        batch=batch.read_text(errors="replace") if batch.exists() else "",
        events=run_history.read(str(logs)) if logs.exists() else [],
        status=slurmgen(where, env, "status", job).stdout,
        history=slurmgen(where, env, "history", job).stdout,
        report=json.loads(report.stdout) if report.returncode == 0 else {"error": report.stderr},
        job=json.loads(facts.stdout) if facts.returncode == 0 else {"error": facts.stderr},
        state_files=sorted(f.name for f in state_dir.iterdir()) if state_dir.exists() else [],
        processes=local_place.processes_under(where),
        shm=sorted(d for d in os.listdir("/dev/shm") if d.startswith(f"slurmgen-{os.getuid()}-{key:08x}-"))
        if os.path.isdir("/dev/shm")
        else [],
        jobs=len(jobs),
    )
