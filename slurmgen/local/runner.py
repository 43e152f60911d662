"""Run a planned local job: the real script in its own process group, Slurm's signals at Slurm's moments, a
requeue when the job asks for one, and nothing left running afterwards, whatever happens.

What Slurm does and the runner copies (sbatch(1) --signal and --time, slurm.conf(5) KillWait, scontrol(1)
requeue):
- `--signal=B:<sig>@<lead>`: SIGCONT, then the signal, to the batch shell only, `lead` s before the limit,
  once per run; `--preempt-after S` sends the same at S s of the first run (preemption with
  preempt_send_user_signal);
- the time limit: SIGCONT and SIGTERM to every process, SIGKILL after KillWait; the job ends TIMEOUT;
- `scontrol requeue`: the running job's processes get the same TERM/KILL sequence, then the script starts
  again from the top with SLURM_RESTART_COUNT one higher, up to the spec's requeue budget;
- the batch shell's end ends the job: processes it left behind are ended the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from slurmgen import contract, run_history, trust
from slurmgen.atomic import write_text
from slurmgen.exit_codes import EXIT_CANCELLED, EXIT_TIMEOUT
from slurmgen.local import handler_notice, jobenv, procs, rehearse, setup
from slurmgen.local.fake_scontrol import (
    ENDING,
    EXCLUDED,
    NO_REQUEUE,
    PREEMPTED,
    REQUEUE_REQUEST,
    requeue_request_text,
)
from slurmgen.local.local_jobs import CANCEL_REQUEST, RUNNER_FILE, SIGNAL_REQUEST
from slurmgen.local.step_watch import DEFAULT_WAIT, RankZeroProgress, StepMoment
from slurmgen.slurm.ids import local_label
from slurmgen.spec.model import JobSpec

INTERRUPT_WAIT = 5.0  # after Ctrl-C: TERM, then KILL after this long (a second Ctrl-C: at once)
POLL = 0.05
FAKES = {
    "srun": "slurmgen.local.fake_srun",
    "scontrol": "slurmgen.local.fake_scontrol",
    "scancel": "slurmgen.local.fake_scancel",
}


@dataclass(frozen=True)
class LocalJob:
    spec: JobSpec
    script: str
    paths: setup.Paths
    shape: jobenv.JobShape
    preempt_after: float | None = None
    rehearse: tuple[str, int, float | None] | None = None  # --kill-rank/--hang-rank R --after S (None: --at-step)
    bad_node: int | None = None  # --bad-node N: emulated node N fails its checks in every run
    steps: tuple[StepMoment, ...] = ()  # --preempt-at-step N, --at-step N: in the first run (slurmgen.local.step_watch)
    step_wait: float = DEFAULT_WAIT
    kill_wait: float = jobenv.DEFAULT_KILL_WAIT
    runaway_requeues: int = setup.RUNAWAY_REQUEUES


@dataclass(frozen=True)
class RunEnd:
    state: str  # COMPLETED, FAILED, TIMEOUT, CANCELLED, REQUEUE (this run ended by a requeue)
    code: int


def fake_wrapper(python: str, module: str, package_parent: str) -> str:
    """A tiny sh script that runs a fake with this interpreter and this slurmgen (not whatever is on PATH)."""
    code = f"import sys; sys.path.insert(0, {package_parent!r}); from {module} import main; sys.exit(main())"
    return f'#!/bin/sh\nexec {shlex.quote(python)} -c {shlex.quote(code)} "$@"\n'


class Runner:
    def __init__(
        self,
        job: LocalJob,
        environ: Mapping[str, str],
        out: Callable[[str], object],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        python: str = sys.executable,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.job, self.environ, self.clock, self.sleep, self.python = job, environ, clock, sleep, python
        self.wall = wall  # the time progress marks carry (their st_mtime)
        self._out = out
        self.interrupts = 0
        self.cancelled = False
        self.runs = 0
        # What became of the rehearsals' moments: "preempt", "rank" -> rehearse.DONE, NOBODY or GAVE_UP (a step
        # rehearsal's step not reached within --step-wait); absent: not reached
        self.rehearsed: dict[str, str] = {}

    @property
    def label(self) -> str:
        """The id the job commands take (`local-3`), printed at the head of every line: the one to copy."""
        return local_label(self.job.shape.job_id)

    def say(self, line: str) -> None:
        self._out(f"slurmgen: {self.label}: {line}")

    # -- set-up ----------------------------------------------------------------------------------------------

    def prepare(self) -> None:
        p = self.job.paths
        p.bin.mkdir(mode=0o700, parents=True, exist_ok=True)
        p.batch_log.parent.mkdir(parents=True, exist_ok=True)
        write_text(p.script, self.job.script, mode=0o700)
        parent = str(Path(__file__).resolve().parents[2])  # the directory slurmgen is imported from
        for name, module in FAKES.items():
            write_text(p.bin / name, fake_wrapper(self.python, module, parent), mode=0o700)
        (p.control / CANCEL_REQUEST).unlink(missing_ok=True)  # left by an earlier runner of this job
        if "\n#SBATCH --no-requeue" in self.job.script:
            (p.control / NO_REQUEUE).touch()

    def env(self, restart: int) -> dict[str, str]:
        from slurmgen.slurm.hostlist import expand_hostlist

        excluded = _read(self.job.paths.control / EXCLUDED).strip()
        shape = replace(self.job.shape, restart_count=restart, excluded=tuple(expand_hostlist(excluded or "")))
        prefix = [str(self.job.paths.bin), os.path.dirname(self.python)]
        env = jobenv.batch_env(shape, self.environ, str(self.job.paths.control), prefix)
        env[jobenv.KILL_WAIT] = f"{self.job.kill_wait:g}"
        if shape.gpus is None:  # a CPU run: a program's failure for want of a GPU is not restarted
            env[contract.LOCAL_NO_GPU] = "1"
        if self.job.bad_node is not None:
            env[jobenv.BAD_NODE] = jobenv.node_names(self.job.bad_node)[-1]  # --bad-node N: its checks fail
        return env

    # -- the whole job ---------------------------------------------------------------------------------------

    def run(self, restart: int = 0) -> RunEnd:
        """Run until the job ends (requeues included); Ctrl-C and SIGTERM end it. Never leaves a process.
        `restart`: the first run's SLURM_RESTART_COUNT (`slurmgen resume` of a local job continues its count)."""
        previous = {s: signal.signal(s, self._interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
        procs.become_subreaper()
        try:
            self.prepare()
            while True:
                end = self.run_once(restart)
                self._say_fallback()
                if end.state != "REQUEUE":
                    return end
                if self.interrupts:
                    return RunEnd("CANCELLED", 130)
                if self.cancelled or (self.job.paths.control / CANCEL_REQUEST).exists():
                    self.say("cancelled between two runs (slurmgen cancel): no further run")
                    return RunEnd("CANCELLED", EXIT_CANCELLED)
                if restart >= self.job.runaway_requeues:
                    self.say(
                        f"requeue refused: {restart} requeues already, the local runner's limit for a job that keeps "
                        "asking (its own budgets, preemption.max_requeues and max_preemptions, did not stop it; a "
                        "cluster would requeue it again)"
                    )
                    return RunEnd("FAILED", 1)
                restart += 1
        finally:
            (self.job.paths.control / RUNNER_FILE).unlink(missing_ok=True)
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _interrupted(self, signum: int, frame: Any) -> None:
        self.interrupts += 1

    # -- one run ---------------------------------------------------------------------------------------------

    def run_once(self, restart: int) -> RunEnd:
        p = self.job.paths
        for stale in (REQUEUE_REQUEST, SIGNAL_REQUEST, PREEMPTED, ENDING, "steps"):
            (p.control / stale).unlink(missing_ok=True)
        for registered in p.control.glob("step-*.pid"):  # a run killed before its srun could clean up
            registered.unlink(missing_ok=True)
        self.runs += 1
        log = trust.open_write(str(p.batch_log), mode=0o644)  # a planted (dangling) link creates nothing
        try:
            proc = subprocess.Popen(
                [str(p.script)],
                cwd=p.workdir,
                env=self.env(restart),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # its own process group: every signal below reaches all of it
                close_fds=True,
            )
        finally:
            os.close(log)
        count = f" with SLURM_RESTART_COUNT={restart}" if restart else ""
        self.say(f"run {self.runs} started{count}: batch shell pid {proc.pid} (process group {proc.pid})")
        self._record(proc.pid)
        try:
            return self._supervise(proc)
        finally:
            if procs.group_members(proc.pid):  # an error in slurmgen itself: still leave nothing behind
                procs.signal_process(proc.pid, signal.SIGKILL, group=True)
                procs.wait_empty(proc.pid, 5.0, lambda: self._reap(proc))
            self._escaped(proc)
            self._reap(proc)
            if not procs.group_members(proc.pid) and not procs.adopted(proc.pid)[0]:
                self._clear_node_dirs()

    def _clear_node_dirs(self) -> None:
        """Once no process of the run is left: every emulated node's directory of the job (/dev/shm), which a task
        whose supervisor was killed before it could leave it (SIGKILL after the kill wait, a crash's casualties
        ended by srun) leaves behind. A cluster's site does this for a job where it gives each job its own /dev/shm
        (Slurm's job_container/tmpfs); the batch shell clears the first node's, and here every node is this
        machine. Only the user's own directory, never through a link (progress_mark.clear_node_dir)."""
        from slurmgen.job_context.context import JobContext
        from slurmgen.progress_mark import clear_node_dir

        for host in jobenv.node_names(self.job.shape.nodes):
            env = {contract.LOG_DIR: str(self.job.paths.task_logs), contract.NODE_NAME: host}
            clear_node_dir(JobContext.from_environ(env))

    def _reap(self, proc: subprocess.Popen[bytes]) -> None:
        """Collect the batch shell's status and the zombies of orphaned tasks (we are their subreaper)."""
        proc.poll()
        procs.reap(procs.adopted(proc.pid)[1])

    def _escaped(self, proc: subprocess.Popen[bytes]) -> None:
        """Descendants that left the process group (setsid) and were re-parented to us: end them too."""
        live = procs.adopted(proc.pid)[0]
        if not live:
            return
        self.say(f"ending processes {', '.join(map(str, live))}: they left the job's process group")
        for sig in (signal.SIGTERM, signal.SIGKILL):
            # `live` was listed after the last reap: children of ours not yet reaped, so no pid was reused.
            for pid in live:
                procs.signal_process(pid, sig)
            live = procs.wait_gone(
                lambda: procs.adopted(proc.pid)[0], 2.0, lambda: self._reap(proc), self.clock, self.sleep
            )
            if not live:
                return

    def _supervise(self, proc: subprocess.Popen[bytes]) -> RunEnd:
        start = self.clock()
        rehearse_after = None if self.job.rehearse is None else self.job.rehearse[2]
        events = setup.timeline(self.job.spec, self.runs, self.job.preempt_after, rehearse_after)
        moments = list(self.job.steps) if self.runs == 1 else []  # as --preempt-after and --after: the first run
        progress = RankZeroProgress(str(self.job.paths.task_logs), jobenv.node_names(self.job.shape.nodes), self.wall())
        request = self.job.paths.control / REQUEUE_REQUEST
        while True:
            rc = proc.poll()
            if request.exists():
                self.say(
                    f"requeue requested ({requeue_request_text(_read(request))}); ending run {self.runs} as Slurm does"
                )
                self._slurmstepd_line("CANCELLED", "DUE TO JOB REQUEUE")
                self._end(proc, self.job.kill_wait, hurry=lambda: self.interrupts > 0)
                return RunEnd("REQUEUE", 0)
            if rc is not None:
                if procs.group_members(proc.pid):
                    self.say("the batch shell ended with processes still running; ending them as Slurm does")
                    self._end(proc, self.job.kill_wait)
                if request.exists():
                    continue
                return RunEnd("COMPLETED" if rc == 0 else "FAILED", procs.exit_code(rc))
            if (self.job.paths.control / CANCEL_REQUEST).exists():
                self.cancelled = True
                (self.job.paths.control / CANCEL_REQUEST).unlink(missing_ok=True)  # taken: `cancel` returns
                wait = self.job.kill_wait
                self.say(f"cancelled (slurmgen cancel): SIGTERM to every process, SIGKILL after {wait:g} s")
                self._slurmstepd_line("CANCELLED", "")
                self._ending("CANCELLED")
                self._end(proc, wait, hurry=lambda: self.interrupts > 0)
                return RunEnd("CANCELLED", EXIT_CANCELLED)
            if self.interrupts:
                self.say(
                    f"interrupted: ending the job (SIGTERM, SIGKILL after {INTERRUPT_WAIT:g} s or a second Ctrl-C)"
                )
                self._slurmstepd_line("CANCELLED", "")
                self._ending("CANCELLED")
                self._end(proc, INTERRUPT_WAIT, hurry=lambda: self.interrupts > 1)
                return RunEnd("CANCELLED", 130)
            self._signal_request(proc.pid)
            elapsed = self.clock() - start
            while events and events[0].at <= elapsed:
                end = self._fire(events.pop(0), proc)
                if end is not None:
                    return end
            if moments:
                self._step_moments(moments, progress, elapsed, proc)
            self.sleep(POLL)

    def _step_moments(
        self, moments: list[StepMoment], progress: RankZeroProgress, elapsed: float, proc: subprocess.Popen[bytes]
    ) -> None:
        """Fire the step rehearsals whose step rank 0's program reached (one per fresh mark: the next counts only
        marks written after it fired), and give up those whose --step-wait ran out."""
        step = progress.step()
        if step is not None and step >= moments[0].step:
            moment = moments.pop(0)
            self.say(f"{moment.option}: rank 0's program is at step {step} ({elapsed:.1f} s into run {self.runs})")
            self._fire(setup.Event(elapsed, moment.kind, moment.step), proc)
            progress.since = self.wall()
        for moment in [m for m in moments if elapsed >= self.job.step_wait]:
            moments.remove(moment)
            self.rehearsed["preempt" if moment.kind == "preempt" else "rank"] = rehearse.GAVE_UP
            seen = "no progress mark of rank 0 seen" if progress.seen is None else f"rank 0 at step {progress.seen}"
            self.say(f"{moment.option}: step {moment.step} not reached in {self.job.step_wait:g} s of run "
                     f"{self.runs} (--step-wait; {seen}); not rehearsed, the run goes on")  # fmt: skip

    def _fire(self, event: setup.Event, proc: subprocess.Popen[bytes]) -> RunEnd | None:
        sig = self.job.spec.preemption.signal
        if event.kind == "rehearse" and self.job.rehearse is not None:
            acted = rehearse.act_on_rank(proc.pid, self.job.rehearse[1], self.job.rehearse[0], self.say)
            self.rehearsed["rank"] = rehearse.DONE if acted else rehearse.NOBODY
            if acted:
                self._record_rehearsal(self.job.rehearse[0])
            return None
        if event.kind in ("preempt", "warn"):
            why = (
                "preemption rehearsal"
                if event.kind == "preempt"
                else f"--signal=B:{sig}@{self.job.spec.preemption.lead_time}"
            )
            at = f"{event.at:g} s" if event.step is None else f"step {event.step} ({event.at:.1f} s)"
            self.say(f"SIGCONT, SIG{sig} to the batch shell at {at} of run {self.runs} ({why})")
            self._auto_notice(sig)
            if event.kind == "preempt":  # as slurmctld marks a job it preempts (scontrol show job: PreemptTime)
                self.rehearsed["preempt"] = rehearse.DONE
                self._record_rehearsal("preempt")
                write_text(self.job.paths.control / PREEMPTED, time.strftime("%Y-%m-%dT%H:%M:%S") + "\n")
            self._to_batch_shell(proc.pid, sig)
            return None
        self.say(
            f"time limit {self.job.spec.time} reached: SIGTERM to every process, SIGKILL after {self.job.kill_wait:g} s"
        )
        self._slurmstepd_line("CANCELLED", "DUE TO TIME LIMIT")
        self._ending("TIMEOUT")
        self._end(proc, self.job.kill_wait, hurry=lambda: self.interrupts > 0)
        return RunEnd("TIMEOUT", EXIT_TIMEOUT)

    def _record_rehearsal(self, what: str) -> None:
        """The run history's note that the stop to come is a rehearsal: the checkpoint-interval advice counts no
        rehearsal as an interruption of the job (slurmgen/goodput/advice_basis.py)."""
        with contextlib.suppress(OSError, trust.Untrusted):
            run_history.append(str(self.job.paths.task_logs), "local", run_history.REHEARSAL, self.runs,
                               time.time(), what=what)  # fmt: skip

    def _auto_notice(self, sig: str) -> None:
        line = handler_notice.auto_notice(self.job.spec, str(self.job.paths.task_logs), self.runs, sig)
        if line is not None:
            self.say(line)

    def _say_fallback(self) -> None:
        for line in handler_notice.fallback_lines(str(self.job.paths.task_logs), self.runs):
            self.say(line)

    def _to_batch_shell(self, pid: int, sig: str) -> None:
        procs.signal_process(pid, signal.SIGCONT)
        procs.signal_process(pid, getattr(signal, "SIG" + sig))

    def _signal_request(self, pid: int) -> None:
        path = self.job.paths.control / SIGNAL_REQUEST
        if not path.exists():
            return
        sig = _read(path)
        path.unlink(missing_ok=True)
        if sig and hasattr(signal, "SIG" + sig):
            self.say(f"SIGCONT, SIG{sig} to the batch shell (slurmgen run --signal)")
            self._auto_notice(sig)
            self._to_batch_shell(pid, sig)

    def _end(self, proc: subprocess.Popen[bytes], wait: float, hurry: Callable[[], bool] = lambda: False) -> None:
        killed, left = procs.end_group(proc.pid, wait, lambda: self._reap(proc), self.clock, self.sleep, hurry=hurry)
        if killed:
            self.say(f"SIGKILL to the processes still running after {wait:g} s")
        if left:
            self.say(f"processes {', '.join(map(str, left))} survived SIGKILL (stuck in the kernel?)")

    def _ending(self, state: str) -> None:
        """From now on `scontrol show job` says the job is ending, as slurmctld does once it ends a job: the batch
        shell's helper then leaves the ending to Slurm instead of waiting for a step to stop (fake_scontrol)."""
        write_text(self.job.paths.control / ENDING, state + "\n")

    def _slurmstepd_line(self, state: str, why: str) -> None:
        """The line slurmstepd writes into the batch log, so the log reads as on a cluster."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        node = jobenv.node_names(1)[0]
        words = ["slurmstepd: error: *** JOB", self.job.shape.job_id, "ON", node, state, "AT", stamp, why, "***"]
        with os.fdopen(trust.open_write(str(self.job.paths.batch_log), mode=0o644), "a", encoding="utf-8") as handle:
            handle.write(" ".join(w for w in words if w) + "\n")

    def _record(self, batch_pid: int) -> None:
        info = {
            "runner_pid": os.getpid(),
            "runner_start": procs.start_time(os.getpid()),
            "batch_pid": batch_pid,
            "run": self.runs,
            "job_id": self.job.shape.job_id,
        }
        write_text(self.job.paths.control / RUNNER_FILE, json.dumps(info) + "\n")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""
