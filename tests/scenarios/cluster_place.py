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

import dataclasses
import json
import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scenarios import local_place
from scenarios.axes import Scenario
from scenarios.observation import Observation

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
class Site:
    """Where a scenario is submitted from: the directory its job.yaml is written to and its slurmgen commands run
    in, their environment, the submit's arguments before job.yaml, and the output directory the job writes on
    the cluster's side (for the login node, job.yaml's own `logs`; for a remote job, its run directory's)."""

    cwd: Path
    env: dict[str, str]
    submit: tuple[str, ...]
    logs: Path
    waits: bool = True  # `submit --wait` follows the job (over ssh it cannot yet: the engine polls Slurm instead)
    container: str = ""  # a `container:` spec line: the program runs in that image, with its `python`

    def adapt(self, spec: str) -> str:
        """The scenario's spec for this site: in a container, the command runs the image's own interpreter (the
        spec's `python` stays the host's, for the batch shell's helper)."""
        if not self.container:
            return spec
        image_python = re.search(r"python: ([^,}]+)", self.container)
        assert image_python, self.container
        command = f"command: {json.dumps([PY])[:-1]}"
        assert command in spec, spec
        return spec.replace(command, f"command: {json.dumps([image_python[1].strip()])[:-1]}", 1) + self.container

    @classmethod
    def login_node(cls, where: Path, cluster: Any) -> Site:
        return cls(where, {**local_place.environment(), **cluster.env}, ("submit",), where / "logs")

    def argv(self) -> list[str]:
        return [PY, "-m", "slurmgen", *self.submit, "job.yaml", *(["--wait"] if self.waits else [])]


@dataclass(frozen=True)
class ClusterPlan(local_place.Plan):
    acts: tuple[str, ...] = ()  # what the engine does from outside, in words, for the reproduction
    submit: tuple[str, ...] = ("submit",)
    waits: bool = True

    def reproduction(self) -> str:
        lines = shlex.join(self.spec.splitlines())
        then = f"  # then: {'; '.join(self.acts)}" if self.acts else ""
        wait = " --wait" if self.waits else ""
        return f"printf '%s\\n' {lines} > job.yaml && slurmgen {shlex.join(self.submit)} job.yaml{wait}{then}"


def plan(s: Scenario, where: Path, submit: tuple[str, ...] = ("submit",), waits: bool = True) -> ClusterPlan:
    base = local_place.plan(s, where)
    acts = []
    for i in s.interruptions:
        at = f"at rank 0's STEP {int(i.at)}"
        acts += {
            "crash": [f"{at}: kill -KILL rank {i.rank}'s program"],
            "hang": [f"{at}: kill -STOP rank {i.rank}'s program"],
            "preempt_first": ["when run 1 starts: scancel --batch --signal=USR1 JOB"],
            "preempt_save": [f"{at}: scancel --batch --signal=USR1 JOB"],
            "preempt_restart": [
                f"{at}: kill -KILL rank {i.rank}'s program",
                "as the step restarts: scancel --batch --signal=USR1 JOB",
            ],
            "requeue": [f"{at}: slurmgen requeue JOB"],
        }.get(i.kind, [])
    return ClusterPlan(spec=base.spec, args=[], steps=base.steps, step_time=base.step_time, acts=tuple(acts),
                       submit=submit, waits=waits)  # fmt: skip


def program_of(where: Path, rank: int) -> int | None:
    """The pid of rank ``rank``'s program (not its task supervisor nor torchrun's agent): its command line runs
    the scenario's program with this scenario's state file, and its environment says RANK=rank."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if len(argv) < 2 or os.fsdecode(argv[1]) not in (str(local_place.PROGRAM), str(local_place.LIGHTNING)):
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

    def __init__(self, s: Scenario, where: Path, site: Site, cluster: Any, job: str) -> None:
        self.s, self.where, self.site, self.cluster, self.job = s, where, site, cluster, job
        self.log = site.logs / f"scen-{job}" / "rank-0.log"
        self.batch = site.logs / f"scen-{job}.log"
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
            done = slurmgen(self.site.cwd, self.site.env, "requeue", self.job)
            (self.where / "requeue.err").write_text(done.stdout + done.stderr)
        else:
            pid = program_of(self.where, i.rank)
            if pid is None:
                self.missed.append(f"{i.words()}: rank {i.rank}'s program was not running")
                return
            os.kill(pid, signal.SIGSTOP if i.kind == "hang" else signal.SIGKILL)
            if i.kind == "preempt_restart":
                self.pending.append("signal")


def run(s: Scenario, where: Path, cluster: Any, site: Site | None = None, timeout: float = 400
        ) -> tuple[ClusterPlan, Observation]:  # fmt: skip
    """Submit the scenario from ``site`` (default: the login node, in ``where``), do its acts, wait for its end and
    observe what it left."""
    site = site or Site.login_node(where, cluster)
    p = plan(s, where, site.submit, site.waits)
    p = dataclasses.replace(p, spec=site.adapt(p.spec))
    (site.cwd / "job.yaml").write_text(p.spec)
    deadline = time.monotonic() + timeout
    out_path, err_path = where / "runner.out", where / "runner.err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(site.argv(), cwd=site.cwd, env=site.env, stdout=out, stderr=err)
        job = ""
        acts: Acts | None = None
        ended = 0  # polls in a row that found the job ended (a requeue passes through states of its own)
        try:
            while time.monotonic() < deadline:
                if not job and (found := re.match(r"(\d+)\s*$", out_path.read_text())):
                    job = found[1]
                    acts = Acts(s, where, site, cluster, job)
                if acts is not None:
                    acts.poll()
                submitted = proc.poll() is not None
                if submitted and (site.waits or not job):
                    break  # `submit --wait` followed the job to its end, or the submit failed
                if job and not site.waits:
                    info = cluster.client.show_job(job)
                    done = info is not None and info.state.is_terminal and acts is not None and not acts.todo
                    ended = ended + 1 if done else 0
                    if ended >= 2:
                        break
                time.sleep(0.2 if site.waits else 1.0)
            code = proc.wait(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    said = out_path.read_text()
    job = job or (m[1] if (m := re.search(r"job=(\d+)", said)) else "")
    info = cluster.client.show_job(job) if job else None
    if info is not None and not info.state.is_terminal:
        cluster.run(["scancel", job])  # out of time: the scenario fails on its outcome, and leaves no job behind
    runner = err_path.read_text(errors="replace")
    if acts is not None and acts.missed:
        runner += "".join(f"\nslurmgen scenario: {m}: never fired" for m in acts.missed)
    if info is not None and info.state.is_terminal:
        runner += f"\n{info.state.name}, exit code {info.exit_code or 0}, {info.restarts + 1} runs\n"
        if not site.waits:
            code = info.exit_code or 0  # no `submit --wait` to exit with the job's code: Slurm's stands for it
    return p, observe(where, site, job, runner, code)


JOB_FACTS = (
    "import json, sys, slurmgen\n"
    "j = slurmgen.Job(sys.argv[1])\n"
    "print(json.dumps({'state': j.state(), 'exit_code': j.exit_code, 'restarts': j.restarts(),"
    " 'history': j.history()}, default=str))\n"
)


def observe(where: Path, site: Site, job: str, runner: str, code: int) -> Observation:
    cwd, env = site.cwd, site.env
    report = slurmgen(cwd, env, "report", job, "--json")
    facts = subprocess.run([PY, "-c", JOB_FACTS, job], cwd=cwd, env=env, capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
    home = Path(env["SLURMGEN_HOME"]) if env.get("SLURMGEN_HOME") else cwd / ".slurmgen"
    journals = [*home.glob("journal.jsonl"), *home.glob("*/journal.jsonl")]
    # a submission's journal says `submitting` (no id yet), then `submitted` with Slurm's id: the ids are the jobs
    records = [json.loads(line) for j in journals for line in j.read_text().splitlines() if line.strip()]
    jobs = {r["job_id"] for r in records if r.get("job_id")}
    views = {view: slurmgen(cwd, env, view, job).stdout for view in ("status", "history")}
    return local_place.left_behind(where, site.logs, f"scen-{job}", runner, code, views, report, facts, len(jobs))
