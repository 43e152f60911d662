"""Real scheduler preemption on the test cluster, one test per site configuration (docs/site.md, "Preemption on your
cluster"): a 2-node x 2-rank training job in a low-priority partition is preempted by a `high` job that needs its
nodes, under PreemptMode REQUEUE or CANCEL, with and without a grace time and the user signal.

Each test asserts what a user needs: one save at a step boundary on every rank, the job back in the queue exactly
once (by Slurm or by slurmgen, never both; the run history says who), the next run resuming at the saved step
with the saved weights, the final weights of an uninterrupted run, and no process left on the nodes. Under a
grace time the job must give its nodes back as soon as its state is durable, well before the grace ends.

The partitions come from tests/cluster/up.sh (tests/cluster/README.md: low-requeue, low-requeue-grace,
low-cancel, low-cancel-grace over the same three nodes; KillWait 5 s); `slurm_preemption` serialises these
tests across sessions and switches the cluster-wide user signal.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SlurmCluster
from once_per_run import once_per_run
from slurm_versions import Preemption

from slurmgen import contract
from slurmgen.slurm.ids import JobState, version_tuple

from .cluster_jobs import check_resume, job_history, logs, spec_text, submit, wait_for_text

pytestmark = [pytest.mark.slurm, pytest.mark.torch]

STEPS, STEP_TIME = 700, 0.02  # about 15 s of steps: preempted 3 s into run 1, and a short run 2
NODES = "node1,node2"


@dataclass(frozen=True)
class Preempted:
    job: str
    text: str  # the job's logs, all runs
    preemptor: str
    preemptor_waited: float  # seconds from the preemptor's submission until it ran


def preempt(
    cluster: SlurmCluster, tmp_path: Path, name: str, partition: str, extra: str = "", text: str | None = None
) -> Preempted:
    """Run the training job in ``partition`` (or the spec ``text``); once every rank steps, submit a `high` job
    that needs both its nodes; wait for the job's second run to complete."""
    if text is None:
        text = spec_text(tmp_path, name, steps=STEPS, step_time=STEP_TIME, extra=f"partition: {partition}\n{extra}")
    job = submit(cluster, tmp_path, text, f"--nodelist={NODES}")
    wait_for_text(tmp_path, name, job, r"start at step 0", count=4, timeout=180)
    time.sleep(3)  # some steps, and a periodic save, before the preemption
    submitted = time.monotonic()
    high = cluster.run(["sbatch", "--parsable", "-p", "high", f"--nodelist={NODES}", "-N", "2",
                        "--ntasks-per-node=2", "-o", "/dev/null", "--wrap", "sleep 2"])  # fmt: skip
    assert high.returncode == 0, high.stderr
    preemptor = high.stdout.strip().split(";")[0]
    cluster.wait_for(preemptor, lambda i: i.state in (JobState.RUNNING, JobState.COMPLETED), timeout=120)
    waited = time.monotonic() - submitted
    info = cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
    text = logs(tmp_path, name, job)
    assert info.state is JobState.COMPLETED and info.restarts == 1, f"{info.state_name} {info.restarts}\n{text[-3000:]}"
    return Preempted(job, text, preemptor, waited)


@pytest.fixture(scope="module")
def uninterrupted_weights(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The final weights of the same job run without a preemption (debug partition): the same on every Slurm
    version (the same program, ranks and arithmetic), so made once for the whole test run, on the cluster of the
    first version that asks (tests/once_per_run.py)."""

    def make() -> str:
        tmp = tmp_path_factory.mktemp("uninterrupted")
        job = submit(slurm_cluster, tmp, spec_text(tmp, "ref", steps=STEPS, step_time=0.0))
        info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
        assert info.state is JobState.COMPLETED
        found = re.search(r"final weights (\S+)", logs(tmp, "ref", job))
        assert found
        return found[1]

    return str(once_per_run(tmp_path_factory, f"scheduler-preemption-weights-{STEPS}", make))


def processes_of(tmp_path: Path) -> list[int]:
    """Processes on any node (they share this machine's process table) whose command line names the test's
    directory: the job's batch shells, sruns, entry points and training ranks."""
    mine = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(tmp_path) in cmdline and "pytest" not in cmdline:
            mine.append(int(entry))
    return mine


def check(result: Preempted, tmp_path: Path, name: str, weights: str, requeued_by: str, mode: str | None) -> None:
    text = result.text
    stops = re.findall(r"rank (\d)/4: start at step 0 .* run 1", text)
    assert len(stops) == 4, text[-3000:]
    # One save at a step boundary, agreed by every rank, and a resume at exactly that step with those weights.
    assert len(re.findall(r"stopping after step \d+", text)) == 1, text[-3000:]
    assert len(re.findall(r"saved state to \S+ \(.*, preemption\)", text)) == 1, text[-3000:]
    check_resume(text)
    assert len(re.findall(r"start at step [1-9]\d* on \S+, run 2, last stop: preemption", text)) == 4
    assert re.search(rf"final weights {re.escape(weights)}", text), "the resumed run ended elsewhere"
    runs = job_history(tmp_path, name, result.job)
    assert [(r.run, r.cause, r.requeued_by, r.mode) for r in runs] == [
        (1, "preemption", requeued_by, mode),
        (2, None, None, None),
    ], runs
    deadline = time.monotonic() + 10
    while processes_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_of(tmp_path) == []


@pytest.fixture
def preemption(slurm_preemption: Preemption) -> Iterator[Preemption]:
    slurm_preemption.user_signal(False)
    yield slurm_preemption


def test_requeue_without_grace_slurm_requeues_and_the_job_resumes(
    slurm_cluster: SlurmCluster, preemption: Preemption, tmp_path: Path, uninterrupted_weights: str
) -> None:
    """PreemptMode=REQUEUE, GraceTime=0: SIGTERM to everything; Slurm has requeued the job already. The ranks
    save on the TERM; nobody requeues a second time; the history credits Slurm."""
    result = preempt(slurm_cluster, tmp_path, "pr-rq", preemption.requeue)
    check(result, tmp_path, "pr-rq", uninterrupted_weights, requeued_by="slurm", mode="REQUEUE")


def grace_requeuer(cluster: SlurmCluster) -> tuple[str, str | None]:
    """Who requeues a job that ends during its grace time in a REQUEUE partition, and the mode its history shows:
    Slurm itself since 24.05 (slurmgen.interruption.requeue_route.slurm_requeues_in_grace), rank 0 before."""
    return ("slurm", "REQUEUE") if (version_tuple(cluster.version) or (0, 0)) >= (24, 5) else ("rank0", None)


@pytest.mark.slurm_versions()  # the path Slurm would otherwise lose (FAILED, never requeued), on every version
def test_requeue_with_grace_and_no_user_signal_is_requeued_once_as_soon_as_saved(
    slurm_cluster: SlurmCluster, preemption: Preemption, tmp_path: Path, uninterrupted_weights: str
) -> None:
    """GraceTime > 0 without the user signal: SIGTERM reaches the tasks only. Rank 0 sees PreemptTime; the ranks
    save and exit, and the nodes are free at once. Before 24.05 Slurm requeues only a job still running when the
    grace ends, so rank 0 requeues; since, Slurm requeues a job that ends in its grace, and a requeue of ours
    would make Slurm requeue the next run again as it completes (seen on 24.11: a third run from scratch)."""
    result = preempt(slurm_cluster, tmp_path, "pr-rqg", preemption.requeue_grace)
    requeued_by, mode = grace_requeuer(slurm_cluster)
    check(result, tmp_path, "pr-rqg", uninterrupted_weights, requeued_by=requeued_by, mode=mode)
    assert result.preemptor_waited < preemption.grace_time, result.preemptor_waited


def test_requeue_with_grace_and_the_user_signal_is_requeued_once_as_soon_as_saved(
    slurm_cluster: SlurmCluster, preemption: Preemption, tmp_path: Path, uninterrupted_weights: str
) -> None:
    """The user signal reaches the batch shell alone; it forwards it to every task; save, one requeue."""
    preemption.user_signal(True)
    result = preempt(slurm_cluster, tmp_path, "pr-rqs", preemption.requeue_grace)
    requeued_by, mode = grace_requeuer(slurm_cluster)
    check(result, tmp_path, "pr-rqs", uninterrupted_weights, requeued_by=requeued_by, mode=mode)
    assert "batch shell received SIGUSR1" in result.text
    assert result.preemptor_waited < preemption.grace_time, result.preemptor_waited


def test_cancel_without_grace_the_batch_shell_requeues_the_preempted_job(
    slurm_cluster: SlurmCluster, preemption: Preemption, tmp_path: Path, uninterrupted_weights: str
) -> None:
    """PreemptMode=CANCEL: Slurm would end the job PREEMPTED for good. The batch shell requeues it at the TERM
    (a plain requeue takes back a completing job), and the work goes on under the same job id."""
    result = preempt(slurm_cluster, tmp_path, "pr-ca", preemption.cancel)
    check(result, tmp_path, "pr-ca", uninterrupted_weights, requeued_by="batch-shell", mode="CANCEL")
    assert "preempted with PreemptMode=CANCEL: requeue issued" in result.text


def test_cancel_with_grace_and_the_user_signal_is_requeued_before_slurm_cancels_it(
    slurm_cluster: SlurmCluster, preemption: Preemption, tmp_path: Path, uninterrupted_weights: str
) -> None:
    preemption.user_signal(True)
    result = preempt(slurm_cluster, tmp_path, "pr-cas", preemption.cancel_grace)
    check(result, tmp_path, "pr-cas", uninterrupted_weights, requeued_by="rank0", mode=None)
    assert result.preemptor_waited < preemption.grace_time, result.preemptor_waited


def test_a_save_longer_than_the_window_keeps_the_previous_state_and_the_job(
    slurm_cluster: SlurmCluster, preemption: Preemption, tmp_path: Path
) -> None:
    """CANCEL without grace, and a stop save that takes longer than KillWait: SIGKILL lands mid-save. The state
    saved before is intact, the job was requeued before the save began (not lost), and the next run resumes from
    that earlier state, sweeping the half-written file."""
    text = spec_text(tmp_path, "pr-slow", steps=STEPS, step_time=STEP_TIME, extra=f"partition: {preemption.cancel}\n")
    slow = text.replace("'--save-every', '100'", "'--save-every', '100', '--stop-save-seconds', '30'")
    assert slow != text
    job = submit(slurm_cluster, tmp_path, slow, f"--nodelist={NODES}")
    wait_for_text(tmp_path, "pr-slow", job, r"saved state to \S+ \(.*, periodic\)", count=1, timeout=180)
    high = slurm_cluster.run(["sbatch", "--parsable", "-p", "high", f"--nodelist={NODES}", "-N", "2",
                              "--ntasks-per-node=2", "-o", "/dev/null", "--wrap", "sleep 2"])  # fmt: skip
    assert high.returncode == 0, high.stderr
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
    out = logs(tmp_path, "pr-slow", job)
    assert info.state is JobState.COMPLETED and info.restarts == 1, out[-3000:]
    assert "left by a save that was interrupted" in out
    resumed = re.search(r"resumed weights \S+ at step (\d+)", out)
    assert resumed and int(resumed[1]) % 100 == 0, out[-3000:]  # a periodic save's step, not the stop's
    runs = job_history(tmp_path, "pr-slow", job)
    assert (runs[0].cause, runs[0].requeued_by, runs[0].mode) == ("preemption", "batch-shell", "CANCEL")


def test_a_preemption_whose_signal_never_reached_the_batch_shell_is_acted_on(
    slurm_cluster: SlurmCluster, preemption: Preemption, tmp_path: Path, uninterrupted_weights: str
) -> None:
    """No user signal reaches the batch shell (send_user_signal off here; on 24.11 it was also lost with it on):
    the shell's watcher sees PreemptTime and sends the signal to the shell itself, which forwards it to the tasks.
    Here the tasks have Slurm's TERM too; they take 3 s from the stop to their save (rank 0 requeues after it), so
    the job stays in its grace with PreemptTime shown for seconds, and the watcher, looking every 0.2 s, finds it
    there whatever the machine's load (with an instant stop the job was requeued within milliseconds of the TERM,
    before a look): the notice arriving twice still gives one save, one requeue and the same final weights."""
    name = "pr-watch"
    extra = f"partition: {preemption.requeue_grace}\nsetup: ['export {contract.PREEMPT_POLL}=0.2']\n"
    text = spec_text(tmp_path, name, steps=STEPS, step_time=STEP_TIME, extra=extra)
    slow = text.replace("'--save-every', '100'", "'--save-every', '100', '--stop-delay', '3'")
    assert slow != text
    text = slow
    result = preempt(slurm_cluster, tmp_path, name, preemption.requeue_grace, text=text)
    requeued_by, mode = grace_requeuer(slurm_cluster)
    check(result, tmp_path, name, uninterrupted_weights, requeued_by=requeued_by, mode=mode)
    assert re.search(r"Slurm shows PreemptTime=\S+ for job \d+ but no SIGUSR1 reached the batch shell", result.text)
    assert "batch shell received SIGUSR1" in result.text


@pytest.mark.slurm_versions("24.11")  # where Slurm ends a requeued CANCEL+GraceTime job PREEMPTED (24.05 and later)
def test_cancel_with_grace_continues_in_a_new_job_that_ends_completed(
    slurm_cluster: SlurmCluster, preemption: Preemption, tmp_path: Path, uninterrupted_weights: str
) -> None:
    """PreemptMode=CANCEL with a grace time on 24.11: rank 0 saves, the batch shell submits a continuation job
    (same script, SLURMGEN_RESUME_FROM) instead of a requeue that Slurm would end PREEMPTED whatever the run does.
    The preempted job ends PREEMPTED in its one run, the continuation resumes at the saved step, does the rest and
    ends COMPLETED with the weights of an uninterrupted run."""
    preemption.user_signal(True)
    name = "pr-cont"
    text = spec_text(tmp_path, name, steps=STEPS, step_time=STEP_TIME, extra=f"partition: {preemption.cancel_grace}\n")
    job = submit(slurm_cluster, tmp_path, text, f"--nodelist={NODES}")
    wait_for_text(tmp_path, name, job, r"start at step 0", count=4, timeout=180)
    time.sleep(3)
    high = slurm_cluster.run(["sbatch", "--parsable", "-p", "high", f"--nodelist={NODES}", "-N", "2",
                              "--ntasks-per-node=2", "-o", "/dev/null", "--wrap", "sleep 2"])  # fmt: skip
    assert high.returncode == 0, high.stderr
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal or i.state is JobState.PREEMPTED, timeout=300)
    first = logs(tmp_path, name, job)
    assert (info.state, info.restarts) == (JobState.PREEMPTED, 0), f"{info.state_name}\n{first[-3000:]}"
    [run] = job_history(tmp_path, name, job)
    assert (run.cause, run.requeued_by) == ("preemption", None) and run.continued_as, run
    follow = run.continued_as
    assert re.search(rf"submitted job {follow} to continue job {job} from its state", first), first[-3000:]
    done = slurm_cluster.wait_for(follow, lambda i: i.state.is_terminal, timeout=300)
    text = logs(tmp_path, name, follow)
    assert (done.state, done.restarts, done.exit_code) == (JobState.COMPLETED, 0, 0), f"{done.state_name}\n{text}"
    saved = re.findall(r"stopping after step (\d+)", first)
    assert len(saved) == 1 and len(re.findall(rf"start at step {saved[0]} on ", text)) == 4, text[-3000:]
    check_resume(first + text)
    assert re.search(rf"final weights {re.escape(uninterrupted_weights)}", text), text[-3000:]
