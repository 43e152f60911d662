"""The watch on the program's own checkpoint (task/checkpoint_watch.py) and the resume flag (task/resume_flag.py):
what a sequence of looks makes of real files, the step at a save, the silent-loss line, and when a start gets
resume.args. Real files in a temporary directory; the clock is passed in."""

from __future__ import annotations

import os
from pathlib import Path

from slurmgen import contract, run_history
from slurmgen.checkpoint_steps import older_save, silent_loss, step_at
from slurmgen.job_context.context import JobContext
from slurmgen.task import resume_flag
from slurmgen.task.checkpoint_watch import SETTLE, Watch, look_at, missed


def write(path: Path, data: bytes, mtime: float) -> None:
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))


def test_a_file_saved_in_place_is_one_save_once_its_writes_settle_with_the_write_time_as_cost(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt.pt"
    watch = Watch(look_at("ckpt.pt", str(tmp_path)))  # nothing there yet
    write(ckpt, b"x" * 10, 100.0)
    assert watch.see(look_at("ckpt.pt", str(tmp_path)), 100.1) is None  # mid-write: mtime is now
    write(ckpt, b"x" * 20, 103.0)
    save = watch.see(look_at("ckpt.pt", str(tmp_path)), 103.0 + SETTLE)
    assert save is not None and (save.time, save.size, save.seconds, save.basis) == (103.0, 20, 3.0, "write")
    assert save.path == "ckpt.pt"  # as the spec writes it, relative to the job's directory
    assert watch.see(look_at("ckpt.pt", str(tmp_path)), 110.0) is None  # the same save is not counted twice


def test_a_checkpoint_there_before_the_start_is_no_save_of_it_and_a_quick_save_is_unseen(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt.pt"
    write(ckpt, b"old", 50.0)
    watch = Watch(look_at(str(ckpt)))
    assert watch.see(look_at(str(ckpt)), 60.0) is None
    write(ckpt, b"newer", 70.0)
    save = watch.see(look_at(str(ckpt)), 75.0)
    assert save is not None and (save.time, save.seconds, save.basis) == (70.0, None, "unseen")


def test_the_last_look_after_the_program_ended_records_a_save_made_within_the_last_poll(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt.pt"
    watch = Watch(None)
    write(ckpt, b"last", 200.0)
    save = watch.last(look_at(str(ckpt)), 200.05)
    assert save is not None and save.time == 200.0


def test_a_directory_save_ends_when_a_file_in_it_is_rewritten_in_place_not_when_its_new_file_was_made(
    tmp_path: Path,
) -> None:
    """Lightning's ModelCheckpoint with `save_last`: it creates the step's file, then writes `last.ckpt` over the
    one before. The directory's own mtime stops at the creation; the save ends with the rewrite."""
    out = tmp_path / "ckpts"
    out.mkdir()
    write(out / "last.ckpt", b"old", 10.0)
    os.utime(out, (10.0, 10.0))
    watch = Watch(look_at("ckpts", str(tmp_path)))
    write(out / "epoch=0-step=20.ckpt", b"s" * 7, 100.0)
    os.utime(out, (100.0, 100.0))  # the creation moved the directory's mtime
    assert watch.see(look_at("ckpts", str(tmp_path)), 100.2) is None  # mid-save
    write(out / "last.ckpt", b"n" * 9, 101.5)  # in place: the directory's mtime stays at 100.0
    assert os.stat(out).st_mtime == 100.0
    assert watch.see(look_at("ckpts", str(tmp_path)), 101.6) is None  # still being written
    save = watch.see(look_at("ckpts", str(tmp_path)), 102.5)
    assert save is not None and (save.time, save.size, save.seconds, save.basis) == (101.5, 9, 1.5, "write")
    # A rewrite of an older entry alone, the directory untouched, is the next save.
    write(out / "last.ckpt", b"m" * 9, 120.0)
    save = watch.see(look_at("ckpts", str(tmp_path)), 121.0)
    assert save is not None and save.time == 120.0
    assert watch.see(look_at("ckpts", str(tmp_path)), 130.0) is None


def test_a_glob_sees_a_temporary_file_renamed_into_place_and_times_the_save_by_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    pattern = "out/ckpt.pt*"
    watch = Watch(look_at(pattern, str(tmp_path)))
    (out / "ckpt.pt.tmp").write_bytes(b"half")
    assert watch.see(look_at(pattern, str(tmp_path)), 10.0) is None  # a new name: a save, or a temporary file
    (out / "ckpt.pt.tmp").rename(out / "ckpt.pt")
    save = watch.see(look_at(pattern, str(tmp_path)), 12.5)
    assert save is not None and (Path(save.path).name, save.seconds, save.basis) == ("ckpt.pt", 2.5, "rename")
    (out / "ckpt.pt.2").write_bytes(b"x")  # a new save under a new name, there at two looks
    assert watch.see(look_at(pattern, str(tmp_path)), 20.0) is None
    save = watch.see(look_at(pattern, str(tmp_path)), 21.0)
    assert save is not None and (Path(save.path).name, save.time, save.basis) == ("ckpt.pt.2", 20.0, "unseen")


def events_of(run: int, *samples: tuple[float, int]) -> list[dict[str, object]]:
    kinds = [run_history.FIRST_STEP] + [run_history.PROGRESS] * (len(samples) - 1)
    return [{"event": k, "run": run, "time": t, "step": s} for k, (t, s) in zip(kinds, samples, strict=True)]


def test_the_step_at_a_save_is_read_between_the_progress_samples_around_it() -> None:
    events = events_of(1, (10.0, 0), (20.0, 100), (80.0, 700))
    assert step_at(events, 1, 50.0) == 400.0
    assert step_at(events, 1, 90.0) == 800.0  # after the last sample: at the last rate
    assert step_at(events, 1, 5.0) is None
    assert step_at(events, 2, 50.0) is None


def save_event(run: int, at: float, path: str = "out/ckpt.pt") -> dict[str, object]:
    return {"event": run_history.SAVE, "run": run, "time": at, "cause": "program", "path": path}


def test_a_start_far_behind_the_programs_last_save_gets_one_line_naming_the_checkpoint_and_the_fix() -> None:
    events = [*events_of(1, (10.0, 0), (20.0, 100), (40.0, 300)), save_event(1, 30.0)]
    events += events_of(2, (100.0, 0))
    line = silent_loss(events, 2, 90.0, resumed=False)
    assert line is not None and line.startswith("run 2 started at step 0 although out/ckpt.pt (saved ")
    assert "run 1, step 200) exists: the program does not resume by itself; give it resume.args" in line
    told = silent_loss(events, 2, 90.0, resumed=True)
    assert told is not None and "was given resume.args and still did not resume" in told
    resumed = [*events[:-1], *events_of(2, (100.0, 201))]
    assert silent_loss(resumed, 2, 90.0, resumed=True) is None
    assert silent_loss(events, 2, 120.0, resumed=False) is None  # no first step of this start yet


def job(tmp_path: Path, **env: str) -> JobContext:
    base = {contract.CHECKPOINT: "out/ckpt.pt", contract.RESUME_ARGS: "--init_from=resume 'two words'",
            contract.RESUME_ENV: "RESUME=1", "SLURM_PROCID": "0", "SLURM_JOB_ID": "7"}  # fmt: skip
    return JobContext.from_environ({**base, **env})


def test_a_requeued_or_restarted_start_over_a_checkpoint_gets_resume_args_and_env(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "ckpt.pt").write_bytes(b"saved")
    for env in ({"SLURM_RESTART_COUNT": "1"}, {contract.STEP_ATTEMPT: "2"}, {contract.RESUME_FROM: "6"}):
        environ: dict[str, str] = {}
        command, line = resume_flag.apply(job(tmp_path, **env), ["python", "train.py"], environ, str(tmp_path))
        assert command == ["python", "train.py", "--init_from=resume", "two words"]
        assert environ == {"RESUME": "1", contract.RESUMED: "1"}
        assert line is not None and line.startswith("resuming from out/ckpt.pt (run ")
    # torchrun's worker under an agent that appended them: not twice
    again = job(tmp_path, SLURM_RESTART_COUNT="1", **{contract.RESUMED: "1"})
    assert resume_flag.apply(again, ["python", "train.py", "--init_from=resume"], {}, str(tmp_path))[0] == [
        "python", "train.py", "--init_from=resume"
    ]  # fmt: skip


def test_the_first_start_never_resumes_even_over_a_stale_checkpoint_and_says_so(tmp_path: Path) -> None:
    environ: dict[str, str] = {}
    assert resume_flag.apply(job(tmp_path), ["train"], environ, str(tmp_path)) == (["train"], None)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "ckpt.pt").write_bytes(b"another job's")
    command, line = resume_flag.apply(job(tmp_path), ["train"], environ, str(tmp_path))
    assert command == ["train"] and environ == {}
    assert line is not None and "exists before this job's first start, so it is another job's" in line
    # a requeue without a checkpoint yet (the program never saved): a fresh start, no flag
    (tmp_path / "out" / "ckpt.pt").unlink()
    assert resume_flag.apply(job(tmp_path, SLURM_RESTART_COUNT="1"), ["train"], {}, str(tmp_path))[0] == ["train"]


def test_a_checkpoint_without_resume_fields_is_watched_but_never_flags_a_start(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "ckpt.pt").write_bytes(b"saved")
    bare = job(tmp_path, SLURM_RESTART_COUNT="1", **{contract.RESUME_ARGS: "", contract.RESUME_ENV: ""})
    environ: dict[str, str] = {}
    assert resume_flag.apply(bare, ["train"], environ, str(tmp_path)) == (["train"], None)
    assert environ == {}  # not marked as told: the silent-loss line then says "give it resume.args"


def test_a_first_save_of_a_start_older_than_the_checkpoint_it_replaced_is_said_with_the_fix() -> None:
    events = [*events_of(1, (10.0, 0), (20.0, 100), (40.0, 300)), save_event(1, 30.0)]
    events += events_of(2, (100.0, 0), (110.0, 100))
    line = older_save(events, 2, 90.0, 105.0, resumed=False)
    assert line is not None and line.startswith("run 2 replaced out/ckpt.pt (saved ")
    assert "run 1, step 200) with a save of step 50: it started over and lost that work; the program does " in line
    resumed = [*events_of(1, (10.0, 0), (20.0, 100), (40.0, 300)), save_event(1, 30.0)]
    resumed += events_of(2, (100.0, 200), (110.0, 300))
    assert older_save(resumed, 2, 90.0, 105.0, resumed=True) is None


def test_a_save_the_last_start_did_not_live_to_record_is_recorded_for_its_run_by_the_next(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt.pt"
    write(ckpt, b"last", 150.0)
    history = [{"event": run_history.RUN_START, "run": 1, "time": 100.0}, save_event(1, 140.0),
               {"event": run_history.RUN_START, "run": 2, "time": 160.0}]  # fmt: skip
    found = missed(history, look_at(str(ckpt)))
    assert found is not None and found[0] == 1 and found[1].time == 150.0
    assert missed([*history, save_event(1, 150.0)], look_at(str(ckpt))) is None  # recorded already
    assert missed(history[2:], look_at(str(ckpt))) is None  # older than this job: another job's
