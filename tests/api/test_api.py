"""The Python API without a cluster: what `import slurmgen` costs, the errors it exports, `status` asking Slurm
once for any number of jobs, `submit` refusing a bad spec with the CLI's own line, and the run identity's
spec switch. The cluster half is test_api_cluster.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from recorded import REPO

import slurmgen
from slurmgen import errors
from slurmgen.api.submitting import override_args
from slurmgen.cli.app import main
from slurmgen.script.render import render
from slurmgen.slurm.client import SlurmClient
from slurmgen.slurm.parse import SQUEUE_SEPARATOR
from slurmgen.spec.load import load_text

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "typer", "click", "jinja2", "yaml", "slurmgen.api", "slurmgen.cli", "slurmgen.spec")


def fresh(code: str) -> list[str]:
    """The modules a fresh interpreter loads for ``code``."""
    probe = (
        f"import sys; before = set(sys.modules); {code}; new = sorted(set(sys.modules) - before); "
        "import json; print(json.dumps(new))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)  # fmt: skip
    return list(json.loads(done.stdout))


def test_import_slurmgen_loads_nothing_else() -> None:
    assert fresh("import slurmgen") == ["slurmgen"]


def test_the_api_names_load_no_torch_and_no_cli() -> None:
    loaded = fresh("import slurmgen; slurmgen.Job, slurmgen.submit, slurmgen.status, slurmgen.SpecError")
    assert not [m for m in loaded if m.split(".")[0] in ("torch", "typer", "click", "jinja2", "yaml")], loaded
    assert "slurmgen.cli" not in loaded and "slurmgen.api.job" in loaded


def test_the_exported_errors_are_the_ones_the_cli_maps_to_exit_codes() -> None:
    assert slurmgen.SpecError is errors.SpecError and slurmgen.SlurmgenError is errors.SlurmgenError
    assert issubclass(slurmgen.InvalidJobId, slurmgen.SchedulerError)
    assert issubclass(slurmgen.SchedulerTimeout, slurmgen.SchedulerError)
    assert set(slurmgen.__all__) <= set(dir(slurmgen))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        slurmgen.nope  # noqa: B018


def test_the_package_ships_its_type_information() -> None:
    assert (ROOT / "slurmgen" / "py.typed").is_file()


def test_a_bad_spec_raises_spec_error_with_the_clis_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("bad.yaml").write_text("name: x\ncommand: [python, t.py]\ntime: '00:10:00'\nnodes: 0\n")
    with pytest.raises(slurmgen.SpecError) as caught:
        slurmgen.submit("bad.yaml")
    assert main(["submit", "bad.yaml"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {caught.value}"]
    assert str(caught.value).startswith("bad.yaml:") and "nodes" in str(caught.value)
    assert not Path(".slurmgen").exists()  # nothing half-written


def test_overrides_are_dotted_paths_like_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert override_args({"nodes": 4, "env.MODE": "4", "trackers.wandb": False}) == (
        "nodes=4", 'env.MODE="4"', "trackers.wandb=false"
    )  # fmt: skip
    monkeypatch.chdir(tmp_path)
    Path("ok.yaml").write_text("name: x\ncommand: [python, t.py]\ntime: '00:10:00'\n")
    with pytest.raises(slurmgen.SpecError, match=r"--set: distributed.port"):
        slurmgen.submit("ok.yaml", {"distributed.port": 1})


class CountingSqueue:
    """A Slurm runner that answers squeue from a table of job states and counts the calls."""

    def __init__(self, states: Mapping[str, str]) -> None:
        self.states = states
        self.calls: list[list[str]] = []

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str] | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        assert argv[0] == "squeue"
        wanted = next(a for a in argv if a.startswith("--jobs=")).removeprefix("--jobs=").split(",")
        rows: list[str] = []
        for job, state in self.states.items():
            raw = job.split("_")[0]
            if job in wanted or raw in wanted:
                fields = (job, str(100 + len(rows)), state, "None", "0:01", "10:00", "1", "node1", "debug", "j")
                rows.append(SQUEUE_SEPARATOR.join(fields))
        return subprocess.CompletedProcess(list(argv), 0, "\n".join(rows) + "\n", "")


def test_status_of_twenty_jobs_is_one_squeue_call() -> None:
    states = {str(1000 + i): ("RUNNING", "PENDING", "COMPLETED", "FAILED")[i % 4] for i in range(20)}
    runner = CountingSqueue(states)
    got = slurmgen.status([*states, 5], client=SlurmClient(run=runner))
    assert len(runner.calls) == 1 and "--states=all" in runner.calls[0]
    assert got == {**states, "5": "UNKNOWN"}
    assert slurmgen.status([], client=SlurmClient(run=runner)) == {} and len(runner.calls) == 1


def test_status_folds_an_array_into_one_word() -> None:
    runner = CountingSqueue({"11_1": "COMPLETED", "11_2": "RUNNING", "12_1": "COMPLETED", "12_2": "FAILED"})
    client = SlurmClient(run=runner)
    assert slurmgen.status(["11", "12", "11_1"], client=client) == {"11": "RUNNING", "12": "FAILED",
                                                                    "11_1": "COMPLETED"}  # fmt: skip


def test_wait_raises_timeout_error_and_the_job_goes_on() -> None:
    def running(argv: Sequence[str], env: Mapping[str, str] | None, timeout: float) -> subprocess.CompletedProcess[str]:
        out = "JobId=7 JobName=j JobState=RUNNING Reason=None Restarts=0 ExitCode=0:0 NodeList=node1\n"
        return subprocess.CompletedProcess(list(argv), 0, out, "")

    job = slurmgen.Job(7, client=SlurmClient(run=running))
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"job 7 did not end within 0\.3 s"):
        job.wait(timeout=0.3)
    assert time.monotonic() - started < 5
    assert job.state() == "RUNNING" and job.exit_code is None and job.id == "7" and repr(job) == "Job('7')"


def test_wait_backs_off_while_nothing_changes_and_comes_back_on_a_change() -> None:
    states = iter(["PENDING"] * 6 + ["RUNNING"] * 6)

    def answer(argv: Sequence[str], env: Mapping[str, str] | None, timeout: float) -> subprocess.CompletedProcess[str]:
        out = f"JobId=7 JobName=j JobState={next(states)} Reason=None Restarts=0 ExitCode=0:0\n"
        return subprocess.CompletedProcess(list(argv), 0, out, "")

    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 11:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        slurmgen.Job(7, client=SlurmClient(run=answer)).wait(sleep=sleep)
    assert pauses[:6] == [0.25, 0.375, 0.5625, 0.84375, 1.265625, 1.8984375] and pauses[6] == 0.25
    assert pauses[7:] == [0.375, 0.5625, 0.84375, 1.265625]
    assert all(p <= 2.0 for p in pauses)


def test_a_loaded_spec_is_submitted_like_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmgen.api.submitting import spec_mapping, spec_source
    from slurmgen.spec.load import load_file

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLURMGEN_HOME", raising=False)
    variants = ["preemption: false\n", "array: 0-3\nlauncher: torchrun\nnodes: 2\n",
                "env: {A: '1'}\nsbatch: {exclusive: true, comment: hi}\ncontainer: {image: x.sqsh}\n",
                "srun: {label: true, mpi: pmix, kill-on-bad-exit: false}\nerror: errs\n"]  # fmt: skip
    base = "name: x\ncommand: [python, t.py]\ntime: '00:10:00'\n"
    specs = [load_file(p).spec for p in sorted((ROOT / "jobs").glob("*.yaml"))]
    specs += [load_text(base + extra, "x.yaml").spec for extra in variants]
    for spec in specs:
        source = spec_source(spec, None)
        assert source.path.parent == tmp_path / ".slurmgen" / "specs"
        assert load_file(source.path).spec == spec and load_text(json.dumps(spec_mapping(spec)), "-").spec == spec
    with pytest.raises(slurmgen.SpecError, match=r"^<spec>: nodes: "):
        slurmgen.submit({"name": "y", "command": ["python"], "time": "00:10:00", "nodes": 0})
    assert not (tmp_path / ".slurmgen" / "specs" / "y.yaml").exists()


def test_a_bad_job_id_is_a_usage_error() -> None:
    with pytest.raises(slurmgen.UsageError):
        slurmgen.Job("12; rm -rf /")


def test_the_wandb_export_has_a_spec_switch() -> None:
    base = "name: x\ncommand: [python, t.py]\ntime: '00:10:00'\n"
    on = render(load_text(base, "x.yaml").spec)
    off = render(load_text(base + "trackers: {wandb: false}\n", "x.yaml").spec)
    assert "export SLURMGEN_RUN_ID" in on and "export SLURMGEN_RUN_ID" in off
    assert "WANDB_RUN_ID" in on and "WANDB_RUN_ID" not in off
    with pytest.raises(slurmgen.SpecError, match=r"trackers\.wandb"):
        load_text(base + "trackers: {wandb: maybe}\n", "x.yaml")
    assert json.dumps(load_text(base, "x.yaml").spec.to_dict()["trackers"]) == '{"wandb": true}'


def test_a_sweep_is_submitted_through_its_own_handle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """slurmgen.submit refuses a spec with sweep: (it is many jobs) and names submit_sweep; Sweep() of something
    that is no sweep in the journal is one UsageError line. Neither asks Slurm (no Slurm client is on PATH)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("SLURMGEN_HOME", str(tmp_path / "home"))
    with pytest.raises(slurmgen.UsageError, match=r"slurmgen\.submit_sweep"):
        slurmgen.submit(REPO / "jobs" / "sweep-lr.yaml")
    with pytest.raises(slurmgen.UsageError, match="no sweep of that id"):
        slurmgen.Sweep("nothing-like-it")
    assert not (tmp_path / "home" / "journal.jsonl").exists()
