"""Submitting a sweep without a cluster: the split at MaxArraySize, one sbatch per array, max_parallel across
arrays, the journal's record, status from one Slurm query, and a resubmission's arrays."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm, done

from slurmgen.backends.slurm_here.sbatch import send_sweep_here as submit_sweep
from slurmgen.journal import Journal
from slurmgen.queries import sweep_status
from slurmgen.script.render import render
from slurmgen.spec.load import load_file
from slurmgen.submission import plan as planning
from slurmgen.submission.sweep_plan import compress, dry_run_lines, expand, split, sweep_plan
from slurmgen.submission.sweep_record import load_record, sweep_id_of
from slurmgen.submission.sweep_resubmit import plan_again
from slurmgen.submission.sweep_submit import max_array_size
from sweep.sweep_data import SWEEP_SPEC, pending_row, squeue_rows


def make_plan(tmp_path: Path, lrs: int, seeds: int, extra: str = "") -> planning.Plan:
    path = tmp_path / "sw.yaml"
    path.write_text(SWEEP_SPEC.format(output="logs", lrs=list(range(lrs)), seeds=list(range(seeds)), extra=extra))
    spec = load_file(path).spec
    return planning.plan(path, spec, render(spec), tmp_path / ".slurmgen", tmp_path, "TOKEN")


def slurm(max_size: int, first_job: int = 100) -> FakeSlurm:
    jobs = iter(range(first_job, first_job + 1000))

    def sbatch(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return done(f"{next(jobs)}\n")

    config = f"SLURM_VERSION = 22.05.8\nKillWait = 5 sec\nMaxArraySize = {max_size}\n"
    return FakeSlurm().on("sbatch", answer=sbatch).on("scontrol", "show", "config", out=config)


def on_path(name: str) -> str:
    return f"/usr/bin/{name}"


def test_ranges() -> None:
    assert compress([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert expand("0-2,5,7-9:2%4") == [0, 1, 2, 5, 7, 9]
    assert [(a.offset, a.tasks) for a in split(range(2500), 1001)] == [(0, "0-1000"), (1001, "0-1000"), (2002, "0-497")]
    assert [(a.offset, a.tasks, a.indexes) for a in split([3, 1500, 7], 1001)] == [
        (0, "3,7", (3, 7)),
        (1001, "499", (1500,)),
    ]


def test_a_large_sweep_is_one_sbatch_per_array_chained_for_max_parallel(tmp_path: Path) -> None:
    p = make_plan(tmp_path, 50, 50, "  max_parallel: 5\n")  # 2,500 points
    fake = slurm(max_size=1001)
    client = fake.client()
    sp = sweep_plan(p, max_array_size(client))
    done_ = submit_sweep(sp, client, Journal(tmp_path / ".slurmgen"), which=on_path)
    sbatches = fake.commands("sbatch")
    assert len(sbatches) == 3 and [str(j) for j in done_.jobs] == ["100", "101", "102"]
    args = [argv[2:-1] for argv in sbatches]
    sid = "sw-TOKEN"
    assert args[0] == ["--comment=slurmgen:TOKEN-a0", "--array=0-1000%5", f"--export=ALL,SLURMGEN_SWEEP_ID={sid},"
                       "SLURMGEN_SWEEP_OFFSET=0"]  # fmt: skip
    assert args[1][1:] == ["--array=0-1000%5", f"--export=ALL,SLURMGEN_SWEEP_ID={sid},SLURMGEN_SWEEP_OFFSET=1001",
                           "--dependency=afterany:100"]  # fmt: skip
    assert args[2][1:] == ["--array=0-497%5", f"--export=ALL,SLURMGEN_SWEEP_ID={sid},SLURMGEN_SWEEP_OFFSET=2002",
                           "--dependency=afterany:101"]  # fmt: skip
    assert all(argv[-1] == str(p.script_path) for argv in sbatches)  # one script for every array
    script = p.script_path.read_text()
    assert "    2499) _sg_p_lr='49' _sg_p_seed='49' SLURMGEN_SWEEP_PARAMS='{\"lr\":49,\"seed\":49}' ;;" in script
    # From a fresh shell: the journal names the sweep by id, spec, name or any of its job ids.
    jobs = Journal(tmp_path / ".slurmgen").jobs()
    for name in (sid, "sw", "101", "102_7"):
        assert sweep_id_of(name, jobs, tmp_path) == sid
    record = load_record(sid, jobs)
    latest = record.latest()
    assert len(latest) == 2500 and str(latest[1001][0]) == "101_0" and str(latest[2499][0]) == "102_497"


def test_without_max_parallel_the_arrays_are_independent_and_keep_the_users_dependency(tmp_path: Path) -> None:
    p = make_plan(tmp_path, 3, 3, "dependency: afterok:42\n")
    sp = sweep_plan(p, 4)
    assert [sp.sbatch_args(k, "7")[1] for k in range(3)] == ["--array=0-3", "--array=0-3", "--array=0"]
    assert not any(a.startswith("--dependency") for k in range(3) for a in sp.sbatch_args(k, "7"))
    chained = sweep_plan(make_plan(tmp_path, 3, 3, "  max_parallel: 2\ndependency: afterok:42\n"), 4)
    assert chained.sbatch_args(1, "7")[-1] == "--dependency=afterok:42,afterany:7"
    lines = dry_run_lines(chained)
    assert lines[0] == "sweep sw-TOKEN: 9 point(s) in 3 array(s) (MaxArraySize 4), at most 2 at once"
    assert "'--dependency=afterok:42,afterany:<job id of array 1>'" in lines[2]
    assert lines[4:6] == ["point 0: lr=0 seed=0", "point 1: lr=0 seed=1"]


def test_status_is_one_query_and_shows_every_points_latest_attempt(tmp_path: Path) -> None:
    p = make_plan(tmp_path, 2, 4)  # 8 points
    fake = slurm(max_size=4, first_job=20)
    client = fake.client()
    journal = Journal(tmp_path / ".slurmgen")
    submit_sweep(sweep_plan(p, max_array_size(client)), client, journal, which=on_path)  # arrays 20 (0-3), 21 (4-7)
    record = load_record("sw-TOKEN", journal.jobs())
    again = plan_again(record, [1, 6], 4)
    assert [(a.offset, a.tasks) for a in again.arrays] == [(0, "1"), (4, "2")] and again.attempt == 1
    assert again.plan.script_path == p.script_path  # the first submission's script: the same values
    submit_sweep(again, client, journal, which=on_path, fresh=False)  # arrays 22 (point 1), 23 (point 6)
    record = load_record("sw-TOKEN", journal.jobs())
    text = (
        squeue_rows(20, [(0, "COMPLETED", 0), (1, "FAILED", 3), (2, "RUNNING", 0)])
        + pending_row(20, "3")
        + pending_row(21, "0-3%4")
        + squeue_rows(22, [(1, "COMPLETED", 0)])
    )
    fake.on("squeue", out=text)
    before = len(fake.calls)
    rows = sweep_status.point_rows(record, sweep_status.query(client, record))
    assert len(fake.calls) - before == 1
    assert fake.calls[-1].argv[:4] == ["squeue", "--noheader", "--states=all", "--jobs=20,21,22,23"]
    assert [(r.index, r.job, r.state, r.exit) for r in rows] == [
        (0, "20_0", "COMPLETED", "0"),
        (1, "22_1", "COMPLETED", "0"),  # its latest attempt, not the failed first one
        (2, "20_2", "RUNNING", ""),
        (3, "20_3", "PENDING", ""),
        (4, "21_0", "PENDING", ""),
        (5, "21_1", "PENDING", ""),
        (6, "23_2", "gone", ""),
        (7, "21_3", "PENDING", ""),
    ]
    assert rows[0].values == "lr=0 seed=0"
    assert sweep_status.summary(record, rows) == (
        "sweep sw-TOKEN: 8 points: 4 PENDING, 2 COMPLETED, 1 RUNNING, 1 gone, 2 submissions"
    )
    table = sweep_status.table(rows).splitlines()
    assert table[0].split() == ["POINT", "VALUES", "JOB", "STATE", "RESTARTS", "ELAPSED", "EXIT"]
    assert len(table) == 9


def test_failed_points_are_the_ones_resubmit_reruns(tmp_path: Path) -> None:
    p = make_plan(tmp_path, 1, 3)
    fake = slurm(max_size=1001, first_job=5)
    client = fake.client()
    journal = Journal(tmp_path / ".slurmgen")
    submit_sweep(sweep_plan(p, 1001), client, journal, which=on_path)
    record = load_record("sw-TOKEN", journal.jobs())
    fake.on("squeue", out=squeue_rows(5, [(0, "COMPLETED", 0), (1, "FAILED", 2), (2, "TIMEOUT", 0)]))
    rows = sweep_status.point_rows(record, sweep_status.query(client, record))
    assert [r.index for r in rows if r.failed] == [1, 2]


def test_max_array_size_falls_back_to_slurms_default_only_when_the_config_has_none() -> None:
    fake = FakeSlurm().on("scontrol", "show", "config", out="SLURM_VERSION = 22.05.8\nKillWait = 5 sec\n")
    assert max_array_size(fake.client()) == 1001
    with pytest.raises(ValueError, match="at least 1"):
        split([0], 0)


def test_a_script_over_slurms_size_limit_is_refused_before_sbatch(tmp_path: Path) -> None:
    from dataclasses import replace

    from slurmgen.errors import SpecError

    p = make_plan(tmp_path, 2, 2)
    with pytest.raises(SpecError, match="over Slurm's default max_script_size"):
        sweep_plan(replace(p, script="#" * (4 * 1024 * 1024 + 1)), 1001)
