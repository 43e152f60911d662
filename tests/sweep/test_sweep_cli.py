"""The sweep commands in-process, with stand-in Slurm commands on PATH: submit prints the sweep's id, and status,
logs, cancel and resubmit find the sweep by it from the journal alone (a fresh shell)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli.cli_setup import install_fake, run
from fake_slurm import FakeSlurm

from sweep.sweep_data import SWEEP_SPEC, squeue_rows

CONFIG = "SLURM_VERSION = 22.05.8\nKillWait = 5 sec\nMaxArraySize = 1001\n"


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[FakeSlurm, str]:
    fake = FakeSlurm().on("sbatch", out="7\n").on("scontrol", "show", "config", out=CONFIG).on("squeue", out="")
    install_fake(fake, tmp_path, monkeypatch)
    Path("sw.yaml").write_text(SWEEP_SPEC.format(output="logs", lrs=[1, 2], seeds=[3, 4], extra="  max_parallel: 2\n"))
    code, out, err = run(capsys, "submit", "sw.yaml")
    assert code == 0, err
    return fake, out.strip()


def test_submit_prints_the_sweep_id_and_one_sbatch(sweep: tuple[FakeSlurm, str]) -> None:
    fake, sweep_id = sweep
    assert sweep_id.startswith("sw-")
    [sbatch] = fake.commands("sbatch")
    assert "--array=0-3%2" in sbatch and f"--export=ALL,SLURMGEN_SWEEP_ID={sweep_id},SLURMGEN_SWEEP_OFFSET=0" in sbatch


def test_status_cancel_and_logs_name_the_sweep(
    sweep: tuple[FakeSlurm, str], capsys: pytest.CaptureFixture[str]
) -> None:
    fake, sweep_id = sweep
    fake.on("squeue", out=squeue_rows(7, [(0, "COMPLETED", 0), (1, "FAILED", 3), (2, "RUNNING", 0), (3, "RUNNING", 0)]))
    for name in (sweep_id, "sw.yaml", "sw", "7"):
        code, out, _ = run(capsys, "status", name)
        assert code == 0
        lines = out.splitlines()
        assert lines[2].split() == ["1", "lr=1", "seed=4", "7_1", "FAILED", "0", "00:00:03", "3"]
        assert lines[-1] == f"sweep {sweep_id}: 4 points: 2 RUNNING, 1 COMPLETED, 1 FAILED"
    code, _, err = run(capsys, "cancel", sweep_id, "--signal", "USR2")
    assert code == 2 and "add --point I" in err
    fake.on("scancel", out="")
    code, _, err = run(capsys, "cancel", sweep_id)
    assert code == 0 and f"cancelled array 7 of sweep {sweep_id}" in err, err
    assert fake.commands("scancel") == [["scancel", "7"]]
    code, _, err = run(capsys, "logs", sweep_id)
    assert code == 2 and f"name one point: slurmgen logs {sweep_id} --point I" in err
    code, _, err = run(capsys, "logs", sweep_id, "--point", "9")
    assert code == 2 and "has no point 9; its points are 0-3" in err


def test_resubmit_reruns_the_named_or_failed_points(
    sweep: tuple[FakeSlurm, str], capsys: pytest.CaptureFixture[str]
) -> None:
    fake, sweep_id = sweep
    code, _, err = run(capsys, "resubmit", sweep_id)
    assert code == 2 and "give exactly one of --failed or --points" in err
    fake.on("sbatch", out="8\n")
    code, out, err = run(capsys, "resubmit", sweep_id, "--points", "3,1")
    assert code == 0 and out.strip() == sweep_id, err
    last = fake.commands("sbatch")[-1]
    assert "--array=1,3%2" in last and last[-1] == fake.commands("sbatch")[0][-1]  # the first script: same values
    fake.on("squeue", out=squeue_rows(7, [(0, "COMPLETED", 0), (2, "FAILED", 1)]) + squeue_rows(8, [(1, "FAILED", 3)]))
    fake.on("sbatch", out="9\n")
    code, _, err = run(capsys, "resubmit", sweep_id, "--failed")
    assert code == 0 and "resubmitted points 1,2 of sweep" in err
    assert "--array=1-2%2" in fake.commands("sbatch")[-1]


def test_dry_run_shows_the_arrays_and_values_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    small = CONFIG.replace("1001", "3")
    install_fake(FakeSlurm().on("scontrol", "show", "config", out=small), tmp_path, monkeypatch)
    Path("sw.yaml").write_text(SWEEP_SPEC.format(output="logs", lrs=[1, 2], seeds=[3, 4], extra=""))
    code, out, err = run(capsys, "submit", "--dry-run", "sw.yaml")
    assert code == 0 and out.startswith("#!/bin/bash")
    assert "4 point(s) in 2 array(s) (MaxArraySize 3)" in err
    assert "array 2: points 3-3 (offset 3)" in err and "--array=0 " in err
    assert "point 3: lr=2 seed=4" in err
    assert not Path(".slurmgen").exists() and not Path("logs").exists()
