"""submit without a cluster: the plan, the run directory, the journal, and every way sbatch can answer or not
answer, with a scripted Runner (the Slurm client's one effect) and recorded sbatch/squeue output."""

from __future__ import annotations

import stat
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm, done, timed_out
from recorded import recorded_text
from tiny_job import SPEC

from slurmgen.backends.slurm_here import sbatch as submission
from slurmgen.errors import SchedulerError, SchedulerMissing, SpecError, UsageError
from slurmgen.journal import Entry, Journal
from slurmgen.queries import status
from slurmgen.script.render import render
from slurmgen.slurm.client import SchedulerTimeout, SlurmClient
from slurmgen.slurm.ids import JobId
from slurmgen.spec.load import load_file
from slurmgen.submission import plan, recovery

Answer = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def Script(answer: Answer) -> FakeSlurm:
    """Every command answered by one function of its argv; every call kept."""
    return FakeSlurm().on(answer=answer)


def recorded(name: str) -> str:
    return recorded_text(name)


def timeout(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return timed_out(list(argv))


def make_plan(tmp_path: Path, output: str = "logs", extra: str = "", overrides: Sequence[str] = ()) -> plan.Plan:
    spec_file = tmp_path / "tiny.yaml"
    spec_file.write_text(SPEC.format(output=output) + extra)
    loaded = load_file(spec_file, list(overrides))
    base = tmp_path / ".slurmgen"
    return plan.plan(spec_file, loaded.spec, render(loaded.spec), base, tmp_path, "TOKEN", tuple(overrides))


def has_sbatch(name: str) -> str | None:
    return f"/usr/bin/{name}"


def no_sleep(seconds: float) -> None:
    pass


# --- the plan --------------------------------------------------------------------------------------------------


def test_plan_is_pure_and_exact(tmp_path: Path) -> None:
    p = make_plan(tmp_path)
    assert p.sbatch_argv() == ["sbatch", "--parsable", "--comment=slurmgen:TOKEN", str(p.run_dir / "job.sbatch")]
    assert p.run_dir == tmp_path / ".slurmgen" / "runs" / "tiny" / "TOKEN"
    assert (p.workdir, p.log_dir, p.state_dir) == (tmp_path, tmp_path / "logs", tmp_path / "logs" / "state")
    assert make_plan(tmp_path, extra="preemption: false\n").state_dir is None
    assert list(tmp_path.iterdir()) == [tmp_path / "tiny.yaml"]  # planning touched nothing


def test_plan_follows_chdir_and_keeps_the_users_comment(tmp_path: Path) -> None:
    extra = 'chdir: work\npreemption: {lead_time: 60}\nsbatch: {comment: "my words"}\n'
    p = make_plan(tmp_path, extra=extra)
    assert p.sbatch_args == ("--comment=my words slurmgen:TOKEN",)  # the command line beats #SBATCH --comment
    assert (p.log_dir, p.state_dir) == (tmp_path / "work" / "logs", tmp_path / "work" / "logs" / "state")
    assert make_plan(tmp_path, output="/abs/logs").log_dir == Path("/abs/logs")


# --- a submission --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recording", "job", "cluster"),
    [
        ("sbatch-parsable.out", "3", None),
        ("sbatch-plain.out", "4", None),
        ("handwritten-sbatch-parsable-cluster.out", "42", "alpha"),
        ("handwritten-sbatch-on-cluster.out", "42", "alpha"),
        ("handwritten-sbatch-banner.out", "4567", None),
        ("handwritten-sbatch-parsable-banner.out", "4567", None),
    ],
)
def test_submit_reads_every_sbatch_answer(tmp_path: Path, recording: str, job: str, cluster: str | None) -> None:
    p = make_plan(tmp_path)
    run = Script(lambda argv: done(recorded(recording)))
    env = {"PATH": "/usr/bin", "SLURM_CONF": "/c", "SBATCH_TIMELIMIT": "1", "SLURM_JOB_ID": "8", "HOME": "/h"}
    result = submission.send_job(p, SlurmClient(run, env=env), Journal(p.run_dir.parents[2]), which=has_sbatch)
    assert (str(result.job_id), result.cluster, result.recovered) == (job, cluster, False)
    (argv, sbatch_env), *rest = run.calls
    assert rest == [] and argv == p.sbatch_argv()
    assert sbatch_env == {"PATH": "/usr/bin", "SLURM_CONF": "/c", "HOME": "/h"}  # inherited overrides gone
    events = [(e.event, e.job_id, e.cluster) for e in Journal(tmp_path / ".slurmgen").entries()]
    assert events == [("submitting", None, None), ("submitted", job, cluster)]


def test_the_run_directory_and_log_directory_exist_before_sbatch(tmp_path: Path) -> None:
    p = make_plan(tmp_path, overrides=["nodes=1"])
    seen: dict[str, object] = {}

    def sbatch(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        script = Path(argv[-1])
        seen["script"] = script.read_text()
        seen["logs"] = (tmp_path / "logs").is_dir()
        return done("77\n")

    submission.send_job(p, SlurmClient(Script(sbatch), env={}), Journal(tmp_path / ".slurmgen"), which=has_sbatch)
    assert seen == {"script": p.script, "logs": True}
    assert sorted(f.name for f in p.run_dir.iterdir()) == ["job.sbatch", "spec.resolved.json", "spec.yaml"]
    assert (p.run_dir / "spec.yaml").read_text() == (tmp_path / "tiny.yaml").read_text()
    assert '"nodes=1"' in (p.run_dir / "spec.resolved.json").read_text()
    for directory in (tmp_path / ".slurmgen", tmp_path / ".slurmgen" / "runs", p.run_dir.parent, p.run_dir):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    for file in p.run_dir.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    assert [f.name for f in (tmp_path / "logs").iterdir()] == ["state"]  # preemption.state_dir; no probe left


def test_the_error_logs_directory_exists_before_sbatch_as_the_outputs_does(tmp_path: Path) -> None:
    """Slurm creates neither log directory, and fails a job whose --error it cannot open at launch, with no log."""
    p = make_plan(tmp_path, extra="error: errs/batch\n")
    assert p.error_dir == tmp_path / "errs" / "batch"
    seen: dict[str, bool] = {}

    def sbatch(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        seen["errs"] = (tmp_path / "errs" / "batch").is_dir()
        return done("78\n")

    submission.send_job(p, SlurmClient(Script(sbatch), env={}), Journal(tmp_path / ".slurmgen"), which=has_sbatch)
    assert seen == {"errs": True}
    assert f"{tmp_path / 'errs' / 'batch'} (error)" in plan.dry_run_lines(p)[1]


def test_sbatch_refusal_is_its_message_and_is_journaled(tmp_path: Path) -> None:
    p = make_plan(tmp_path)
    run = Script(lambda argv: done(stderr=recorded("sbatch-error-gres.err"), rc=1))
    with pytest.raises(SchedulerError) as err:
        submission.send_job(p, SlurmClient(run, env={}), Journal(tmp_path / ".slurmgen"), which=has_sbatch)
    assert str(err.value) == (
        "sbatch failed (exit 1): Batch job submission failed: Requested node configuration is not available"
    )
    assert err.value.exit_code == 3
    assert [e.event for e in Journal(tmp_path / ".slurmgen").entries()] == ["submitting", "failed"]


def test_without_sbatch_nothing_is_written(tmp_path: Path) -> None:
    p = make_plan(tmp_path)
    run = Script(lambda argv: done("1\n"))
    with pytest.raises(SchedulerMissing, match=r"^sbatch not found.*--dry-run") as err:
        submission.send_job(p, SlurmClient(run, env={}), Journal(tmp_path / ".slurmgen"), which=lambda name: None)
    assert err.value.exit_code == 4
    assert run.calls == [] and sorted(f.name for f in tmp_path.iterdir()) == ["tiny.yaml"]


@pytest.mark.parametrize(
    ("output", "field", "extra"),
    [
        ("{tmp}/afile/logs", "output", ""),  # a path under a regular file: even root cannot create it
        ("/proc/slurmgen-logs", "output", ""),
        ("logs", "preemption.state_dir", "preemption: {lead_time: 60, state_dir: /proc/slurmgen-state}\n"),
    ],
)
def test_an_unwritable_log_path_fails_before_sbatch(tmp_path: Path, output: str, field: str, extra: str) -> None:
    (tmp_path / "afile").write_text("not a directory")
    p = make_plan(tmp_path, output=output.format(tmp=tmp_path), extra=extra)
    run = Script(lambda argv: done("1\n"))
    with pytest.raises(SpecError) as err:
        submission.send_job(p, SlurmClient(run, env={}), Journal(tmp_path / ".slurmgen"), which=has_sbatch)
    (problem,) = err.value.problems
    assert (problem.source, problem.path) == (str(tmp_path / "tiny.yaml"), field)
    assert problem.message.startswith("cannot write to ")
    assert run.calls == [] and not (tmp_path / ".slurmgen").exists()


# --- timeouts: never a second sbatch ---------------------------------------------------------------------------


def answer_timeout_then(comments: str | None) -> Answer:
    def answer(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        if argv[0] == "sbatch":
            return timeout(argv)
        if comments is None:
            return done(stderr="squeue: error: Socket timed out on send/recv operation\n", rc=1)
        return done(comments)

    return answer


def test_timeout_recovers_the_job_by_its_token(tmp_path: Path) -> None:
    p = make_plan(tmp_path)
    comments = recorded("squeue-comments.out") + f"77\x1fslurmgen:{p.token}\n"
    run = Script(answer_timeout_then(comments))
    journal = Journal(tmp_path / ".slurmgen")
    result = submission.send_job(p, SlurmClient(run, env={}), journal, which=has_sbatch, sleep=no_sleep)
    assert (result.job_id, result.recovered) == (JobId(77), True)
    assert len(run.commands("sbatch")) == 1
    assert run.commands("squeue") == [
        ["squeue", "--me", "--noheader", "--states=all", "--format=%i\x1f%k", "--name=tiny"]
    ]
    assert [(e.event, e.job_id, e.extra) for e in journal.entries()] == [
        ("submitting", None, {}),
        ("submitted", "77", {"recovered": True}),
    ]


def test_timeout_on_a_multi_cluster_site_looks_on_each_cluster_named(tmp_path: Path) -> None:
    """`-M alpha,beta`: sbatch may have put the job on either, so the token is looked for on each (every lookup
    naming its cluster); found on beta, the job is beta's, as if sbatch had answered `77;beta`."""
    p = make_plan(tmp_path, extra="sbatch: {clusters: 'alpha,beta'}\n")

    def answer(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        if argv[0] == "sbatch":
            return timeout(argv)
        return done(f"77\x1fslurmgen:{p.token}\n" if argv[1] == "--clusters=beta" else "")

    run = Script(answer)
    journal = Journal(tmp_path / ".slurmgen")
    result = submission.send_job(p, SlurmClient(run, env={}), journal, which=has_sbatch, sleep=no_sleep)
    assert (result.job_id, result.cluster, result.recovered) == (JobId(77), "beta", True)
    assert len(run.commands("sbatch")) == 1
    assert [argv[1] for argv in run.commands("squeue")] == ["--clusters=alpha"] * recovery.LOOKUPS + ["--clusters=beta"]
    assert [(e.event, e.job_id, e.cluster) for e in journal.entries()] == [("submitting", None, None),
                                                                         ("submitted", "77", "beta")]  # fmt: skip


@pytest.mark.parametrize("comments", [None, "", "78\x1fslurmgen:OTHER\n79\x1fslurmgen:TOKEN-not\n"])
def test_timeout_without_the_job_says_so_and_does_not_resubmit(tmp_path: Path, comments: str | None) -> None:
    p = make_plan(tmp_path)
    run = Script(answer_timeout_then(comments))
    journal = Journal(tmp_path / ".slurmgen")
    slept: list[float] = []
    with pytest.raises(SchedulerTimeout) as err:
        submission.send_job(p, SlurmClient(run, env={}), journal, which=has_sbatch, sleep=slept.append)
    assert "it was probably not submitted" in str(err.value) and "grep TOKEN" in str(err.value)
    assert len(run.commands("sbatch")) == 1
    assert len(run.commands("squeue")) == recovery.LOOKUPS and len(slept) == recovery.LOOKUPS - 1
    assert [e.event for e in journal.entries()] == ["submitting", "unknown"]
    assert [e.token for e in journal.unresolved()] == ["TOKEN"]


def test_a_timed_out_submission_is_found_by_status_and_settled_by_the_next_submit(tmp_path: Path) -> None:
    p = make_plan(tmp_path)
    journal = Journal(tmp_path / ".slurmgen")
    with pytest.raises(SchedulerTimeout):
        submission.send_job(p, SlurmClient(Script(answer_timeout_then("")), env={}), journal, which=has_sbatch,
                          sleep=no_sleep)  # fmt: skip
    late = Script(lambda argv: done(f"91\x1fmy words slurmgen:{p.token}\n"))
    before = journal.path.read_bytes()
    targets, rows, notes = status.recent(journal, SlurmClient(late, env={}))
    assert notes == ["note: the submission of tiny (token TOKEN) whose sbatch timed out is job 91"]
    assert [str(t.job) for t in targets] == ["91"] and rows == []
    assert journal.path.read_bytes() == before  # status only reads
    notes = recovery.settle_unresolved(journal, SlurmClient(late, env={}))
    assert notes == ["note: the submission of tiny (token TOKEN) whose sbatch timed out is job 91"]
    assert [e.job_id for e in journal.jobs()] == ["91"] and journal.unresolved() == []
    assert recovery.settle_unresolved(journal, SlurmClient(late, env={})) == []  # settled: no more lookups


# --- test-only -----------------------------------------------------------------------------------------------


def test_would_run_asks_without_submitting(tmp_path: Path) -> None:
    p = make_plan(tmp_path)
    run = Script(lambda argv: done(stderr=recorded("sbatch-test-only.err")))
    result = submission.would_run(p, SlurmClient(run, env={}), which=has_sbatch)
    assert (result.nodes, result.partition) == ("node1", "debug")
    ((argv, _),) = run.calls
    assert argv[:4] == ["sbatch", "--parsable", "--test-only", "--comment=slurmgen:TOKEN"]
    assert not Path(argv[-1]).exists()  # the temporary script is gone
    assert sorted(f.name for f in tmp_path.iterdir()) == ["tiny.yaml"]

    too_large = Script(lambda argv: done(stderr=recorded("sbatch-test-only-too-large.err"), rc=1))
    with pytest.raises(SchedulerError, match=r"cannot run on this cluster: .*Requested node configuration"):
        submission.would_run(p, SlurmClient(too_large, env={}), which=has_sbatch)


# --- a journal that cannot be written ------------------------------------------------------------------------


def test_an_unwritable_run_directory_stops_before_sbatch(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    p = plan.plan(tmp_path / "tiny.yaml", make_plan(tmp_path).spec, "#!/bin/bash\n", tmp_path / "afile" / "sg",
                  tmp_path, "TOKEN")  # fmt: skip
    run = Script(lambda argv: done("1\n"))
    with pytest.raises(UsageError, match=r"cannot write the run directory .*set SLURMGEN_HOME"):
        submission.send_job(p, SlurmClient(run, env={}), Journal(tmp_path / "afile" / "sg"), which=has_sbatch)
    assert run.calls == []


class FailingJournal(Journal):
    """Accepts the line before sbatch, then the disk is full."""

    def append(self, entry: Entry) -> None:
        if entry.event != "submitting":
            raise OSError(28, "No space left on device")
        super().append(entry)


def test_a_job_submitted_is_reported_even_when_the_journal_fails_afterwards(tmp_path: Path) -> None:
    p = make_plan(tmp_path)
    run = Script(lambda argv: done("88\n"))
    result = submission.send_job(p, SlurmClient(run, env={}), FailingJournal(tmp_path / ".slurmgen"), which=has_sbatch)
    assert result.job_id == JobId(88)
    assert result.problems == (
        f"job 88 is not in the journal {tmp_path}/.slurmgen/journal.jsonl: No space left on device",
    )
