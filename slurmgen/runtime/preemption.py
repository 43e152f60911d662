"""Preemption that works: signal, agree, checkpoint atomically, requeue once, resume.

    pre = Preemption()               # installs the handlers
    state = pre.load()               # the previous run's state on every rank, or None
    found = pre.load(into=state)     # or: fill a (sharded) state in place; True if there was one
    ...
    if pre.should_stop():            # every rank, every step; True everywhere once any rank got a signal
        pre.save_and_exit(state)     # saves (not on USR2), requeues if asked, exits every rank

Signals (the handlers only record them; all work happens at a step boundary):
- the preemption signal (SLURMGEN_PREEMPT_SIGNAL, default USR1): save, requeue, exit;
- TERM: save and exit; no requeue (a preempted job may get only TERM, and Slurm may requeue it itself);
- USR2: exit cleanly without saving; CONT: ignored (Slurm sends it before every signal).

Agreement: `should_stop()` all-reduces the requested actions over a small gloo group, so every rank leaves at
the same step and none is left inside a collective (a rank that leaves early makes the others wait out the
process-group timeout inside a gloo/NCCL collective; Megatron's DistributedSignalHandler does
the same). A dead peer makes the others exit with one clear line at once (its connections close); a stuck one,
after the process-group timeout, the same patience every collective of the step has, so a rank that is only
slow (rank 0 writing a large periodic save) is waited for, not taken for lost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from slurmgen import contract, exit_codes, interruption, run_history
from slurmgen.interruption.requeue_route import slurm_requeue_cause, slurm_requeues_in_grace
from slurmgen.interruption.running import StopFacts, signal_meanings
from slurmgen.job_context.context import JobContext
from slurmgen.progress_mark import ProgressMark
from slurmgen.progress_sample import ProgressSampler
from slurmgen.requeue import record, requeue_this_job, signal_cause, site_facts
from slurmgen.runtime.checkpoint.commit import CheckpointError
from slurmgen.runtime.checkpoint.layout import keep_count
from slurmgen.runtime.checkpoint.settings import StoreSettings
from slurmgen.runtime.checkpoint.store import CheckpointStore
from slurmgen.runtime.peer_loss import install_peer_loss_hook
from slurmgen.runtime.peers import Peers
from slurmgen.task.signal_block import parse_signal_name

if TYPE_CHECKING:
    from slurmgen.interruption.requeue_route import SiteFacts
    from slurmgen.runtime.checkpoint.background import PendingSave
    from slurmgen.runtime.checkpoint.record import SaveRecord

REQUEUE, SAVE, EXIT, TERM = 1, 2, 4, 8
FAILURE_BYTES = 1024  # the most of rank 0's failed-save line the other ranks are told
ACTIONS = {"requeue": REQUEUE, "save": SAVE, "exit": EXIT, "term": TERM}


def _log(message: str) -> None:
    print(f"slurmgen: {message}", file=sys.stderr, flush=True)


class Preemption:
    """Signal handling, stop agreement, atomic resume state and requeue for one training process."""

    def __init__(
        self,
        path: str | None = None,
        *,
        signal_name: str | None = None,
        timeout: float | None = None,
        max_requeues: int | None = None,
        weights_only: bool = True,
        crc32: bool = False,
        keep: int | None = None,
        on_save: Callable[[SaveRecord], None] | None = None,
        save_phase: Callable[[str], None] | None = None,
        environ: Mapping[str, str] | None = None,
        exit: Callable[[int], Any] = os._exit,
        total_steps: int | None = None,
    ) -> None:
        # This process's job, read once (slurmgen/job_context/); the budget given here replaces the spec's below.
        self.context = JobContext.from_environ(dict(os.environ if environ is None else environ))
        configured = self.context.preempt_signal
        # Under slurmgen's script without SLURMGEN_PREEMPT_SIGNAL, the spec switched preemption off: the signal
        # still stops the run cleanly (with a save) but never requeues.
        self.requeue_enabled = configured is not None or self.context.spec_hash is None
        self.signal = parse_signal_name(signal_name or configured or contract.DEFAULT_PREEMPT_SIGNAL)
        self.key = self.context.key or "local"
        # Outside a job (no SLURM_JOB_ID) the default state would be ./local.state, shared by every direct run of
        # the script: the next run would resume from it unasked, whatever its arguments. There, state is kept
        # only at a path the program names (docs/preemption.md, "Resume state").
        self.keeps_state = path is not None or self.context.key is not None
        self._said_no_state = False
        self.spec_hash = self.context.spec_hash or ""
        self.state_dir = self.context.state_dir or (os.path.dirname(os.path.abspath(path)) if path else ".")
        self.path = os.path.abspath(path or os.path.join(self.state_dir, f"{self.key}.state"))
        # `slurmgen resume` of a job Slurm has forgotten submits its script again; the new job starts from the
        # old one's state (same spec), then saves under its own key.
        resume_from = self.context.resume_from or ""
        self.resume_from = resume_from if path is None and resume_from.replace("_", "").isdigit() else None
        self.restart_count = self.context.restart_count
        self.last_cause = _last_cause(self.context)  # why the previous run stopped, if there was one
        self.cause: str | None = None  # why this run stops, once decided
        self.step_seconds: float | None = None  # the longest recent interval between two should_stop() calls
        self._last_check: float | None = None
        self._progress: ProgressMark | None = None  # the hang watchdog's per-step progress (task/watchdog.py)
        self._steps = 0  # should_stop() calls in this process: its steps (a restart's steps lost are counted in them)
        self._step: int | None = None  # the program's own step at its last should_stop(step=...), for the last sample
        if max_requeues is not None:
            self.context = dataclasses.replace(self.context, max_requeues=max_requeues)
        # The agreement waits as long as any collective of the training step may (the process-group timeout).
        self.peers = Peers(self.context, timeout=timeout, exit=exit)
        # Rank 0's sampled progress for `slurmgen status` and `slurmgen report` (slurmgen/progress_sample.py).
        # With spec section progress: the task supervisor samples the steps the program prints instead, one writer.
        sampled = self.rank if not self.context.progress_pattern else -1
        self._sampler = ProgressSampler(self.context, sampled, total_steps)
        self.weights_only = weights_only
        self.crc32 = crc32  # torch's per-tensor checksum in the saved file (costs ~0.3 s/GiB; see state.py)
        self._exit = exit
        self._flags = 0
        self._received: list[str] = []
        self._decided = 0
        # rank 0's at the stop: Slurm's view, the run history, the site's facts
        self._stop_facts: tuple[Any, run_history.History | None, SiteFacts | None] = (None, None, None)
        self._install()
        import atexit

        atexit.register(self._at_exit)
        install_peer_loss_hook(exit)
        if self.requeue_enabled:
            # Pay for the requeue path now, not in the seconds between the signal and the kill.
            import slurmgen.requeue
            import slurmgen.slurm.client  # noqa: F401
        # Plain states and sharded checkpoints (runtime/checkpoint/): a path the user named is resumed whoever
        # wrote it; the job-keyed default refuses another job's state (but takes `resume_from`'s).
        settings = StoreSettings(
            self.key, self.spec_hash, self.restart_count, keep_count(keep, self.context), named=path is not None,
            weights_only=weights_only, crc32=crc32, resume_from=self.resume_from,
        )  # fmt: skip
        listener = self._reporter = SaveReporter(self.context, self.peers, on_save)
        # save_phase: called at each phase of a sharded save (checkpoint/dcp_io.py PHASES), on the thread that
        # saves; the fault tests kill a rank there.
        self._store = CheckpointStore(self.path, settings, self.peers, listener=listener, phase=save_phase)
        if self.rank == 0:
            for leftover in self._store.sweep():
                _log(f"removed {leftover}, left by a save that was interrupted")
            # Announced for preemption.handler auto: the batch shell forwards the signal to a program that will
            # act on it, and stops (then requeues) one that would not.
            record(self.context, "rank0", run_history.HANDLER, handler="runtime")

    @property
    def timeout(self) -> float:
        """Seconds the stop agreement and the wait for rank 0's final save may take."""
        return self.peers.timeout

    # -- signals --------------------------------------------------------------------------------------------

    def _install(self) -> None:
        # What each signal means is the interruption policy's; here it becomes the flags the ranks agree on.
        meanings = signal_meanings(signal.Signals(self.signal).name[3:], self.requeue_enabled)
        wanted = {
            signal.Signals[f"SIG{name}"]: EXIT | (REQUEUE if m.requeue else 0) | (SAVE if m.save else 0)
            | (TERM if m.terminated else 0)
            for name, m in meanings.items()
        }  # fmt: skip
        for sig, actions in wanted.items():
            signal.signal(sig, self._handler(actions))
        signal.signal(signal.SIGCONT, signal.SIG_IGN)
        # The entry point blocked the preemption signal across exec so that an early one stays pending
        # (task/signal_block.py); now that a handler exists, let it (and anything pending) in.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(wanted))

    def _handler(self, actions: int) -> Callable[[int, Any], None]:
        def handle(signum: int, frame: Any) -> None:  # only records: no I/O, no locks, no collectives
            self._flags |= actions
            self._received.append(signal.Signals(signum).name.removeprefix("SIG"))

        return handle

    def _at_exit(self) -> None:
        """The program left by its own end (save_and_exit leaves by os._exit and never comes here). Its work is
        done: a stop signal from now on must change nothing.

        CPython's finalization gives every signal that has a Python handler back its default action
        (_PySignal_Fini, called by Py_FinalizeEx after the atexit callbacks and before the modules are torn
        down); the default action of USR1, USR2 and TERM ends the process. A preemption signal in that window
        (a second or more with torch loaded) would end a finished program by the signal: the job FAILED (exit
        138) with its work done, its afterok dependants never started, or requeued for a useless run. Ignored
        signals stay ignored through finalization, so they are ignored here. Rank 0 records that the program
        finished, the evidence the batch shell needs to tell a late preemption from an unfinished job."""
        for sig in (self.signal, signal.SIGTERM, signal.SIGUSR2):
            with contextlib.suppress(ValueError, OSError):  # not the main thread: nothing to protect there
                signal.signal(sig, signal.SIG_IGN)
        if self._decided:
            return  # a stop was agreed (the program chose not to exit)
        try:
            rank = self.rank
        except Exception:  # at exit, a torch that is half torn down must not matter
            rank = self.context.rank
        if rank != 0:
            return
        if getattr(sys, "last_value", None) is not None:
            # An exception ended the program (the interpreter sets sys.last_value as it prints it, before the
            # atexit callbacks): not finished, but its last step is known, and status and report show that one,
            # not a sample taken up to a minute before the failure.
            with contextlib.suppress(Exception):
                self._last_sample()
            return
        late = ", ".join(f"SIG{name}" for name in dict.fromkeys(self._received))
        if late:
            _log(f"{late} came after the program's last stop check; its work is done, so it changes nothing")
        self._last_sample()  # status shows this step, not a mid-run one
        with contextlib.suppress(OSError):
            record(self.context, "rank0", run_history.FINISHED, signals=list(dict.fromkeys(self._received)))

    def _last_sample(self) -> None:
        """Rank 0's last sample of this start, and its node mark made to hold the same step: a program killed
        after this (a signal at interpreter exit) leaves its supervisor that step to record (task/supervisor.py)."""
        self._sampler.last(self._steps, time.monotonic(), self._step)
        if self._progress is not None:
            self._progress.touch(self._steps, self._step, last=True)

    def request(self, *actions: str) -> None:
        """Ask for a stop from code (e.g. a time budget), with actions among requeue, save, exit."""
        for action in actions:
            self._flags |= ACTIONS[action]

    # -- ranks and agreement ----------------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        return self.peers.rank

    def _agree(self, local: int) -> int:
        group = self.peers.side_group()
        if group is None:
            return local
        import torch
        import torch.distributed as dist

        bits = torch.tensor([(local >> i) & 1 for i in range(4)], dtype=torch.int64)
        try:
            dist.all_reduce(bits, op=dist.ReduceOp.MAX, group=group)
        except Exception as exc:  # gloo raises RuntimeError/DistError subclasses for a lost or slow peer
            self.peers.lost(exc, "while agreeing to stop")
        return sum(int(bit) << i for i, bit in enumerate(bits.tolist()))

    def should_stop(self, step: int | None = None) -> bool:
        """True on every rank once any rank got a stop signal. Call it on every rank at every step; ``step``, the
        program's own step number (counted across resumes), makes `slurmgen status` show it and its ETA."""
        if self._decided:
            return True
        if self._progress is None:
            self._progress = ProgressMark(self.context, self.rank)
        self._steps += 1
        self._step = step
        self._progress.touch(self._steps, step)
        now = time.monotonic()
        self._sampler.step(self._steps, now, step)
        if self._last_check is not None:
            # What one more step costs before a save can start: it decides whether a stop fits its window.
            # The longest of the recent steps, forgetting slowly (a long first step after a load does not stick).
            interval = now - self._last_check
            self.step_seconds = max(interval, 0.9 * (self.step_seconds or 0.0))
        self._last_check = now
        self._decided = self._agree(self._flags)
        if self._decided:
            received = ", ".join(name for name in dict.fromkeys(self._received)) or "none on this rank"
            if self.rank == 0:
                _log(f"stop agreed at a step boundary ({self._describe(self._decided)}; received here: {received})")
        return bool(self._decided)

    @property
    def stop_actions(self) -> frozenset[str]:
        """What the agreed stop asks for, among "requeue", "save", "exit", "term"; empty until should_stop() says
        True. A framework adapter reads it to skip its own checkpoint on a clean exit (no "save")."""
        return frozenset(name for name, bit in ACTIONS.items() if self._decided & bit)

    def _describe(self, flags: int) -> str:
        if flags & REQUEUE:
            return "save, requeue and exit"
        if flags & SAVE:
            return "save and exit"
        return "exit without saving"

    # -- the resume state --------------------------------------------------------------------------------------

    def load(self, into: Any = None) -> Any:
        """The previous run's state. Without `into`: a plain state on every rank (tensors on CPU), or None. With
        `into` (needed for a sharded checkpoint): fill it in place and return whether a state was found. Rank 0
        picks the newest complete state and says which; the other ranks follow its choice."""
        if not self.keeps_state:
            return None if into is None else False
        began = time.monotonic()
        found = self._store.load(into)
        if self.rank == 0 and (found if into is not None else found is not None):
            with contextlib.suppress(OSError):  # the blocking load, for the report's restore bucket
                record(self.context, "rank0", run_history.LOAD, seconds=round(time.monotonic() - began, 3))
        return found

    def save(
        self, state: Any, cause: str = "periodic", *, async_: bool = False, sharded: bool | None = None
    ) -> SaveRecord | PendingSave | None:
        """Write the state durably. Plain: rank 0, one file (other ranks get None at once). Sharded (a DTensor,
        ShardedTensor or Stateful in it; `sharded=` forces either): every rank, one checkpoint directory. With
        `async_=True` the state is copied to CPU and written in the background: a PendingSave is returned."""
        if not self.keeps_state:
            if not self._said_no_state and self.rank == 0:
                _log("not in a Slurm job and no path given to Preemption(path=...): no state is saved or resumed")
            self._said_no_state = True
            return None
        self._reporter.steps_at_save = self._steps
        return self._store.save(state, cause, async_=async_, sharded=sharded)

    def wait_for_save(self) -> SaveRecord | None:
        """Let a background save finish; the newest durable save's record (None if none yet on this rank)."""
        return self._store.wait()

    @property
    def last_save(self) -> SaveRecord | None:
        """The newest save known durable on this rank (duration, bytes on disk, path)."""
        return self._store.last

    # -- stopping ---------------------------------------------------------------------------------------------

    def stop_cause(self, flags: int, preempted: bool | None = None) -> str:
        """Why the run stops. Slurm's PreemptTime is the authority (``preempted``: None when Slurm could not be
        asked). A requeue signal near the end of the time limit is the limit's own warning; any other is a
        preemption when Slurm says so, or someone's request (`scancel --signal`, `slurmgen cancel --signal`)
        when it does not; unasked, it is taken for a preemption."""
        if flags & REQUEUE or preempted:
            return signal_cause(self.context, preempted, time.time())
        if flags & TERM:
            return "terminated"
        return "clean-exit"

    def _slurm_view(self) -> Any:
        """Slurm's view of this job (slurmgen.slurm.view.SlurmView), or None outside Slurm or without scontrol."""
        if self.context.spec_hash is None or self.context.key is None or self.context.in_container:
            return None  # outside slurmgen's script, or inside a container image (no scontrol there)
        from slurmgen.slurm.view import look

        return look(self.key)

    def _slurm_verdict(self) -> tuple[bool, bool, bool, bool]:
        """(Slurm could be asked, the job was preempted, the job still runs, Slurm requeues it as it ends), as
        rank 0 sees it: only rank 0 asks slurmctld (one RPC per job, not one per rank), and every rank takes its
        answer, so all ranks record and save under the same cause."""
        bits = 0
        if self.rank == 0:
            # Rank 0's facts for this stop, gathered once: Slurm's view, the run history and the site's facts in
            # it, which the requeue below takes as they are (one scontrol question and one read of the history,
            # not one per step).
            view = self._slurm_view()
            history = run_history.History.load(self.context.log_dir)
            site = site_facts(history, self.context.run)
            self._stop_facts = (view, history, site)
            if view is not None:
                preempted = view.preempted() or self._requeued_by_slurm_for_preemption(view, history)
                bits = 1 | (2 if preempted else 0) | (4 if view.running() else 0)
                if preempted and view.running() and slurm_requeues_in_grace(site):
                    bits |= 8
        group = self.peers.side_group()
        if group is not None:
            import torch
            import torch.distributed as dist

            verdict = torch.tensor([bits], dtype=torch.int64)
            try:
                dist.broadcast(verdict, src=0, group=group)
            except Exception as exc:  # rank 0 died or stopped answering while it asked Slurm
                self.peers.lost(exc, "while waiting for rank 0's answer from Slurm")
            bits = int(verdict.item())
        return bool(bits & 1), bool(bits & 2), bool(bits & 4), bool(bits & 8)

    def _requeued_by_slurm_for_preemption(self, view: Any, history: run_history.History) -> bool:
        """Slurm requeued this run already (PreemptMode=REQUEUE, no grace: the TERM came with the requeue, and
        the record no longer shows PreemptTime): a preemption when the partition preempts that way."""
        if not view.requeued_since(self.restart_count):
            return False
        mode = history.site_mode(self.context.run)  # as the batch shell recorded it at this run's start
        return slurm_requeue_cause(False, mode) == run_history.PREEMPTION

    def save_and_exit(self, state: Any = None) -> NoReturn:
        """Save (unless the stop is a clean exit), requeue if the signal asked for it, and end the process."""
        flags = self._decided or self._agree(self._flags) or EXIT
        self._decided = flags
        # From here on a signal changes nothing: the TERM that Slurm sends after our own requeue must not start
        # a second save or a second requeue.
        for sig in (self.signal, signal.SIGTERM, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_IGN)
        known, preempted, running, slurm_requeues = self._slurm_verdict()
        plan = interruption.decide(
            StopFacts(
                asked_requeue=bool(flags & REQUEUE),
                terminated=bool(flags & TERM),
                requeue_enabled=self.requeue_enabled,
                preempted=preempted,
                running=running,
                slurm_requeues=slurm_requeues,
            )
        )
        requeue, code = plan.requeue, plan.code
        if plan.slurm_requeues and self.rank == 0:
            _log("preempted in a PreemptMode=REQUEUE partition: Slurm requeues this job as it ends")
        self.cause = self.stop_cause(flags, preempted if known else None)
        if self.rank == 0:
            self._last_sample()
            record(self.context, "rank0", run_history.STOP, cause=self.cause, actions=self._describe(flags),
                   signals=list(dict.fromkeys(self._received)), step_seconds=self.step_seconds)  # fmt: skip
        # A background save in flight finishes first (every rank takes part in it); its failure was reported.
        self._store.wait(raise_failure=False)
        failure = ""
        if flags & SAVE and state is not None:
            try:
                self.save(state, self.cause)
            except CheckpointError as exc:  # said so in one line; the previous state stays, the stop goes on
                failure = str(exc)
        if requeue and self.rank == 0:
            view, history, site = self._stop_facts
            outcome = requeue_this_job(
                self.cause, self.context, self.state_dir, history=history, before=view, site=site
            )
            _log(outcome.message)
            if outcome.action == "budget":
                code = exit_codes.EXIT_REQUEUE_BUDGET
        self._wait_for_rank0(failure)
        if self.rank != 0:
            code = 0  # never non-zero before rank 0 is done: srun would kill it (exit_codes.EXIT_*)
        sys.stdout.flush()
        sys.stderr.flush()
        self._exit(code)
        raise SystemExit(code)  # only reached when `exit` was replaced (tests)

    def _wait_for_rank0(self, failure: str) -> None:
        """Every rank waits for rank 0 to be done with its save and requeue, and learns whether its final save
        failed (a plain state is written by rank 0 alone): rank 0's one line (empty when it saved), spread by an
        all-reduce in which the others add zeros, so that, as with a barrier, no rank returns before every rank
        has arrived. Only a rank 0 that died or hung is waited out."""
        group = self.peers.side_group()
        if group is None:
            return
        import torch
        import torch.distributed as dist

        box = torch.zeros(FAILURE_BYTES, dtype=torch.uint8)
        if self.rank == 0 and failure:
            data = failure.encode("utf-8", "replace")[:FAILURE_BYTES]
            box[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        try:
            dist.all_reduce(box, op=dist.ReduceOp.MAX, group=group)
        except Exception as exc:  # rank 0 died during its save: nothing left to wait for
            if self.rank != 0:
                _log(f"rank {self.rank}: rank 0 did not finish its save within {self.timeout:g} s: {exc}")
            return
        said = bytes(box.tolist()).rstrip(b"\0").decode("utf-8", "replace")
        if said and self.rank != 0:
            _log(f"rank {self.rank}: rank 0 could not save the state at the stop: {said}")


def _last_cause(ctx: JobContext) -> str | None:
    """Why the previous run of this job stopped (its run history), or None on a first run."""
    if not ctx.log_dir or ctx.restart_count == 0:
        return None
    previous = run_history.History.load(ctx.log_dir).run(ctx.restart_count)
    return None if previous is None else previous.cause


class SaveReporter:
    """Hears every save of the store: rank 0 records it in the run history (the save window is checked from the
    durable ones), and the program's own `on_save` gets each durable one."""

    def __init__(self, ctx: JobContext, peers: Peers, on_save: Callable[[SaveRecord], None] | None) -> None:
        self._ctx, self._peers, self._on_save = ctx, peers, on_save
        self.steps_at_save = 0  # the steps when the newest save was asked for: what a restart resumes from

    def saved(self, saved: SaveRecord) -> None:
        if self._peers.rank == 0:
            kind = "file" if saved.kind == "plain" else saved.kind
            record(self._ctx, "rank0", run_history.SAVE, seconds=round(saved.duration_s, 3), bytes=saved.size_bytes,
                   cause=saved.cause, kind=kind, steps=self.steps_at_save,
                   blocking=round(saved.blocked_s, 3))  # fmt: skip
        if self._on_save is not None:
            self._on_save(saved)

    def save_failed(self, error: str, background: bool) -> None:
        """Rank 0 only (the store has said so in one line)."""
        record(self._ctx, "rank0", run_history.SAVE_FAILED, error=error, background=background)
