"""The `srun` a local job finds first on PATH: starts nodes x tasks-per-node tasks on this machine.

Like srun (srun(1)): tasks get SLURM_PROCID/LOCALID/NODEID/STEP_* in block order, one output file per expanded
--output pattern (all tasks of a node share `%N.log`), every signal srun receives is forwarded to all tasks,
--kill-on-bad-exit ends the others (SIGCONT, SIGTERM, SIGKILL after KillWait) once one exits non-zero (as --mpi=pmix
or pmi2 does on Slurm 26.05 without it), and srun exits with the highest task exit code (128+N for a task killed by
signal N). Tasks stay in the job's process group, so the runner can always end them. pyxis' --container-* options
are accepted and ignored, with one warning: tasks run on this machine, not in the image. While it runs, the step is
registered in the job's control directory (`step-<id>.pid`) for the fake `scontrol show step` and `scancel
--signal`: a signal from scancel is forwarded to every task, as slurmstepd delivers it to every process of the step.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from slurmgen import contract, trust
from slurmgen.local import jobenv, procs
from slurmgen.local.srun_args import SrunArgs, SrunError, parse_args, step_shape

# Signals srun passes on to its tasks (srun(1) SIGNALS); INT and QUIT included: bash starts a background
# srun with them ignored, and a handler here also gives the tasks back their default actions across exec.
FORWARDED = (
    "HUP",
    "INT",
    "QUIT",
    "ALRM",
    "TERM",
    "USR1",
    "USR2",
    "CONT",
    "URG",
    "XCPU",
    "VTALRM",
    "PROF",
    "WINCH",
    "PWR",
)
POLL = 0.02


def next_step_id(control_dir: str | None) -> int:
    """0, 1, 2, ... for the sruns of one run of the job (the runner clears the counter before each run)."""
    if not control_dir:
        return 0
    path = os.path.join(control_dir, "steps")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)
        count = os.fstat(fd).st_size
        os.write(fd, b".")
    finally:
        os.close(fd)
    return count


class Step:
    """The running tasks of one step, with srun's signal forwarding."""

    def __init__(self, shape: jobenv.StepShape, args: SrunArgs, env: Mapping[str, str]) -> None:
        self.shape, self.args, self.env = shape, args, env
        self.tasks: dict[int, tuple[int, int]] = {}  # pid -> (rank, node index)
        # Kept alive on purpose: a collected Popen of a running child joins subprocess's cleanup list, and the
        # next Popen would reap that child behind our back (its exit status lost to os.waitpid below).
        self.popens: list[subprocess.Popen[bytes]] = []
        self.pending: list[tuple[int, int]] = []  # (signal, tasks started when it came)
        self.codes: dict[int, int] = {}
        self.kill_deadline: float | None = None
        self.terminating = False  # --kill-on-bad-exit has started ending the step
        self.kill_wait = float(env.get(jobenv.KILL_WAIT) or jobenv.DEFAULT_KILL_WAIT)

    def forward(self, signum: int, frame: object = None) -> None:
        # Slurm signals every process of the step, not just the task it started (proctrack's kill_proc_tree or
        # the step's cgroup): torchrun's workers get the signal straight from slurmstepd.
        self.pending.append((signum, len(self.popens)))
        for pid in procs.descendants(list(self.tasks)):
            procs.signal_process(pid, signum)

    def outputs(self) -> dict[tuple[int, int], int]:
        """One descriptor per distinct expanded --output path, by (node, local id); empty without --output."""
        if self.args.output is None:
            return {}
        append = self.args.open_mode == "append"
        by_path: dict[str, int] = {}
        fds: dict[tuple[int, int], int] = {}
        user = _user()
        for node, host in enumerate(self.shape.hosts):
            for local in range(self.shape.tasks_per_node):
                path = jobenv.expand_output(
                    self.args.output,
                    job_id=self.shape.job_id,
                    step_id=self.shape.step_id,
                    node=host,
                    node_index=node,
                    task_id=self.shape.rank(node, local),
                    user=user,
                    job_name=self.env.get("SLURM_JOB_NAME", ""),
                )
                if path not in by_path:
                    try:
                        by_path[path] = fd = trust.open_write(path, append=append, mode=0o644)  # never a link
                        if not append:
                            os.ftruncate(fd, 0)
                    except (OSError, trust.Untrusted) as exc:
                        for fd in by_path.values():
                            os.close(fd)
                        why = exc.strerror if isinstance(exc, OSError) else str(exc)
                        raise SrunError(f"Could not open stdout file {path}: {why}") from None
                fds[(node, local)] = by_path[path]
        return fds

    def start(self) -> None:
        fds = self.outputs()
        try:
            for node in range(len(self.shape.hosts)):
                for local in range(self.shape.tasks_per_node):
                    self._spawn(node, local, fds.get((node, local)))
        finally:
            for fd in set(fds.values()):
                os.close(fd)
        # A signal that came while tasks were starting reaches the ones started after it, too.
        for signum, seen in self.pending:
            for proc in self.popens[seen:]:
                procs.signal_process(proc.pid, signum)

    def _spawn(self, node: int, local: int, fd: int | None) -> None:
        rank = self.shape.rank(node, local)
        env = jobenv.task_env(self.env, self.shape, node, local)
        command = rehearsed_command(list(self.args.command), self.shape.hosts[node], self.env)
        try:
            proc = subprocess.Popen(  # the task stays in the job's process group: the runner can end it
                command, env=env, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, close_fds=True
            )
        except OSError as exc:
            _err(f"error: {self.shape.hosts[node]}: task {rank}: execve(): {self.args.command[0]}: {exc.strerror}")
            self.codes[rank] = 2
            self._bad_exit()
            return
        self.tasks[proc.pid] = (rank, node)
        self.popens.append(proc)

    def wait(self) -> int:
        while self.tasks:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                if self.kill_deadline is not None and time.monotonic() >= self.kill_deadline:
                    for other in procs.descendants(list(self.tasks)):
                        procs.signal_process(other, signal.SIGKILL)
                    self.kill_deadline = None
                time.sleep(POLL)
                continue
            if pid not in self.tasks:
                continue
            rank, node = self.tasks.pop(pid)
            code = self.codes[rank] = procs.exit_code(os.waitstatus_to_exitcode(status))
            if code:
                how = f"Exited with exit code {code}" if os.WIFEXITED(status) else _signal_word(status)
                _err(f"error: {self.shape.hosts[node]}: task {rank}: {how}")
                self._bad_exit()
        return max(self.codes.values(), default=0)

    def _bad_exit(self) -> None:
        if not (self.args.kill_on_bad_exit or self.args.mpi_abort) or self.terminating or not self.tasks:
            return
        self.terminating = True
        if self.args.kill_on_bad_exit:
            _err(f"error: Terminating StepId={self.shape.job_id}.{self.shape.step_id} (--kill-on-bad-exit)")
        else:
            # Slurm 26.05's PMI servers end the rest of the step with SIGCONT, SIGTERM and SIGKILL after
            # KillWait (CHANGELOG/slurm-26.05.md; SchedMD/slurm commit 756cb994d8), where older ones sent SIGKILL:
            # the emulation follows 26.05, so the tasks see a TERM no one sent the batch shell.
            _err(f"error: {self.shape.job_id}.{self.shape.step_id}: a task failed: the MPI plugin ends the others")
        # Every process of the step, as slurmstepd's proctrack signals them, not just the task it started.
        for pid in procs.descendants(list(self.tasks)):
            procs.signal_process(pid, signal.SIGCONT)
            procs.signal_process(pid, signal.SIGTERM)
        self.kill_deadline = time.monotonic() + self.kill_wait


def rehearsed_command(command: list[str], host: str, env: Mapping[str, str]) -> list[str]:
    """The task's command, or on the node `slurmgen run --bad-node` names, for the node-check step, a stand-in
    that gives that node's verdict as a failed health check would: the node checks themselves (batch/node_check.py)
    run unchanged, and only the emulator knows which node plays the bad one."""
    entry = ["-m", contract.NODE_CHECK_ENTRY]
    checks = any(command[i : i + 2] == entry for i in range(len(command) - 1))
    if not checks or env.get(jobenv.BAD_NODE) != host:
        return command
    verdict = {"node": host, "ok": False, "reason": "health check failed (rehearsal: slurmgen run --bad-node)"}
    line = json.dumps(json.dumps(verdict) + "\n")  # one write, as node_check.py gives its own
    return [sys.executable, "-c", f"import sys; sys.stdout.write({line}); sys.stdout.flush()"]


def _signal_word(status: int) -> str:
    sig = os.WTERMSIG(status)
    words = {int(signal.SIGKILL): "Killed", int(signal.SIGTERM): "Terminated"}
    return words.get(sig, f"Killed by signal {sig}")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _err(message: str) -> None:
    print(f"srun: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    # Handlers first: the batch shell forwards a signal that came before the step as soon as srun exists.
    early: list[int] = []
    steps: list[Step] = []

    def forward(signum: int, frame: object) -> None:
        if steps:
            steps[0].forward(signum)
        else:
            early.append(signum)

    for name in FORWARDED:
        signal.signal(getattr(signal, "SIG" + name), forward)
    env = dict(os.environ)
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        if args.ignored:
            _err(
                f"warning: ignoring {' '.join(args.ignored)}: the local run uses no container image; tasks run "
                "on this machine with its Python and files"
            )
        if args.unplaced:
            _err(
                f"warning: ignoring {' '.join(args.unplaced)}: on one machine placement and binding change nothing"
                + (" (the MPI plugin still ends the other tasks when one fails)" if args.mpi_abort else "")
            )
        shape = step_shape(args, env, next_step_id(env.get(jobenv.LOCAL_DIR)))
    except (SrunError, ValueError) as exc:
        _err(f"error: {exc}")
        return 1
    step = Step(shape, args, env)
    step.pending.extend((signum, 0) for signum in early)  # for every task, once started
    steps.append(step)
    registry = register_step(env.get(jobenv.LOCAL_DIR), shape.step_id)
    try:
        step.start()
        return step.wait()
    except SrunError as exc:
        _err(f"error: {exc}")
        return 1
    finally:
        if registry is not None:
            with contextlib.suppress(OSError):
                os.unlink(registry)


def step_file(control_dir: str, step_id: int) -> str:
    """Where a running step's srun leaves its pid, for the fake scontrol (show step) and scancel (--signal)."""
    return os.path.join(control_dir, f"step-{step_id}.pid")


def register_step(control_dir: str | None, step_id: int) -> str | None:
    if not control_dir:
        return None
    path = step_file(control_dir, step_id)
    with open(path, "w", encoding="ascii") as handle:
        handle.write(f"{os.getpid()}\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
