"""Rank 0's supervisor reads the step from its program's output (spec section progress:): the lines pass on to the
log unchanged, and the steps found become the run history's sampled progress, as Preemption's do."""

from __future__ import annotations

import os
from pathlib import Path

from slurmgen import contract, run_history
from slurmgen.job_context.context import JobContext
from slurmgen.progress_sample import ProgressSampler
from slurmgen.task import output_progress
from slurmgen.task.output_progress import StepReader, reads_output, relay

PATTERN = r"^iter (\d+):"


def job(log_dir: Path, pattern: str = PATTERN, total: str = "") -> JobContext:
    env = {contract.LOG_DIR: str(log_dir), contract.PROGRESS_PATTERN: pattern}
    if total:
        env[contract.PROGRESS_TOTAL] = total
    return JobContext.from_environ(env)


def progress(log_dir: Path) -> list[dict[str, object]]:
    kinds = (run_history.FIRST_STEP, run_history.PROGRESS)
    return [e for e in run_history.read(str(log_dir)) if e["event"] in kinds]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_steps_in_lines_cut_anywhere_are_sampled_as_preemption_samples_them(tmp_path: Path) -> None:
    ctx = job(tmp_path, total="50")
    clock = Clock()
    reader = StepReader(ctx.progress_pattern, ProgressSampler(ctx, 0, ctx.progress_total), clock)
    reader.feed(b"loading data\niter 1: loss 4.1\nit")  # the first step: first-step at once
    clock.now += 0.5
    reader.feed(b"er 2: loss 3.9\n")  # half a second in: no sample (the next is 1 s after the first)
    clock.now += 0.6
    reader.feed(b"iter 3: loss 3.5\nnot iter 4: loss\n  iter 9: no, indented\n")  # 1.1 s: a sample, at step 3
    clock.now += 0.2
    reader.feed(b"iter 7: loss 2.0")  # no newline yet: the line is whole only at the output's end
    assert reader.step == 3
    reader.end()
    got = [(e["event"], e["steps"], e.get("step"), e.get("step_seconds"), e.get("last")) for e in progress(tmp_path)]
    assert got == [
        (run_history.FIRST_STEP, 1, 1, None, None),
        (run_history.PROGRESS, 3, 3, 0.55, None),  # 1.1 s for 2 steps
        (run_history.PROGRESS, 7, 7, 0.05, True),  # the last: at the end, 0.2 s for 4 steps
    ]
    assert all(e["total_steps"] == 50 and e["by"] == "rank0" for e in progress(tmp_path))


def test_output_without_a_step_records_nothing(tmp_path: Path) -> None:
    ctx = job(tmp_path)
    reader = StepReader(ctx.progress_pattern, ProgressSampler(ctx, 0), Clock())
    reader.feed(b"iter x: loss\nepoch 1\n")
    reader.end()
    assert reader.step is None
    assert progress(tmp_path) == []


def test_a_group_that_is_not_digits_is_no_step(tmp_path: Path) -> None:
    ctx = job(tmp_path, pattern=r"^step=(\S+)")
    reader = StepReader(ctx.progress_pattern, ProgressSampler(ctx, 0), Clock())
    reader.feed(b"step=warmup\nstep=12\n")
    reader.end()
    assert [e["steps"] for e in progress(tmp_path)] == [12, 12]


def test_the_relay_passes_every_byte_on_and_reads_the_steps(tmp_path: Path) -> None:
    ctx = job(tmp_path)
    out = tmp_path / "rank-0.log"
    sink = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    read_end, write_end = os.pipe()
    text = b"".join(b"iter %d: loss %d \xff\n" % (i, i) for i in range(1, 2001)) + b"tail without newline"
    os.write(write_end, text[:30000])
    reader = StepReader(ctx.progress_pattern, ProgressSampler(ctx, 0))
    import threading

    thread = threading.Thread(target=relay, args=(read_end, sink, reader))
    thread.start()
    os.write(write_end, text[30000:])
    os.close(write_end)
    thread.join(30)
    os.close(sink)
    assert out.read_bytes() == text
    assert reader.step == 2000
    samples = progress(tmp_path)
    assert samples[0]["event"] == run_history.FIRST_STEP and samples[-1]["steps"] == 2000 and samples[-1]["last"]


def test_only_rank_0_with_a_pattern_and_a_history_reads(tmp_path: Path) -> None:
    assert reads_output(job(tmp_path), 0)
    assert not reads_output(job(tmp_path), 1)
    assert not reads_output(job(tmp_path, pattern=""), 0)
    assert not reads_output(JobContext.from_environ({contract.PROGRESS_PATTERN: PATTERN}), 0)


def test_the_supervisors_first_sample_says_it_is_a_printed_line(tmp_path: Path) -> None:
    """A printed line is the step the program is at, with no count of the steps this start made: the first sample
    says so (`printed`), so a restart's steps lost are counted from it (run_history.began_at), and only it does."""
    ctx = job(tmp_path)
    sink = os.open(tmp_path / "rank-0.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    read_end, write_end = os.pipe()
    thread, _ = output_progress.start(ctx, read_end, sink)
    os.write(write_end, b"iter 11: loss 2\niter 12: loss 2\n")
    os.close(write_end)
    thread.join(30)
    os.close(sink)
    samples = progress(tmp_path)
    assert samples[0]["event"] == run_history.FIRST_STEP and samples[0]["printed"] is True
    assert run_history.began_at(samples[0]) == 11
    assert all("printed" not in s for s in samples[1:]) and samples[-1]["step"] == 12
