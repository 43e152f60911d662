"""Restart inside the allocation on whole local runs (`slurmgen run`): the rendered script's restart loop, the
fake srun and scontrol, real processes and a real SIGKILL. The same on the real cluster:
tests/runtime/test_recovery_cluster.py."""

from __future__ import annotations

import re
import sys
import zlib
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from runtime.runtime_helpers import without_steering

from local.test_local_handlers import LocalJob, own_command, spec
from slurmgen import run_history

pytestmark = [pytest.mark.slow, pytest.mark.torch]

PY = sys.executable
STEPS = 100


def own_port(where: Path) -> str:
    """A rendezvous port of this test's own: other local jobs on the machine take the default one."""
    return f"distributed: {{port: {20000 + zlib.crc32(str(where).encode()) % 9000}}}\n"


def restarts(job: LocalJob) -> list[dict[str, object]]:
    events = run_history.read(str(job.cwd / "logs" / f"job-{job.job_id()}"))
    return [e for e in events if e.get("event") == run_history.RESTART]


def test_a_killed_rank_is_restarted_inside_the_allocation_from_the_last_checkpoint(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """Rank 1 dies of SIGKILL after step 50 (save every 20): the batch shell starts the step again in the same
    allocation (no requeue: one run), every rank resumes from step 40, and the final weights are those of an
    uninterrupted run of the same program."""
    reference = tmp_path / "reference"
    reference.mkdir()
    plain = LocalJob(
        reference, spec(own_command(reference, steps=STEPS), extra="recovery: false\n" + own_port(reference))
    )
    jobs.append(plain)
    assert plain.finish() == 0, plain.everything()
    expected = re.findall(rf"DONE {STEPS} (\S+) rank=0", plain.file("rank-0.log"))

    crashed = tmp_path / "crashed"
    crashed.mkdir()
    kill = ["--die-rank", "1", "--die-at", "50", "--die-once", str(crashed / "died")]
    job = LocalJob(crashed, spec(own_command(crashed, *kill, steps=STEPS), extra=own_port(crashed)))
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    assert "COMPLETED, exit code 0, 1 run" in job.runner, job.runner
    batch = job.file("batch")
    assert "rank 1 on 127.0.0.1 (killed by SIGKILL) failed: restarting the step inside the allocation (restart 1 " \
           "of 3), from the last complete checkpoint" in batch, batch  # fmt: skip
    assert "requeue issued" not in batch
    ports = re.findall(r"rendezvous at \S+:(\d+)", batch)
    assert len(ports) == 2 and ports[0] != ports[1], batch  # a fresh rendezvous port for the restart
    for rank in range(4):
        assert re.findall(r"RESUMED (\d+) ", job.file(f"rank-{rank}.log")) == ["40"], job.everything()
    assert re.findall(rf"DONE {STEPS} (\S+) rank=0", job.file("rank-0.log")) == expected
    [event] = restarts(job)
    assert (event["cause"], event["rank"], event["attempt"]) == ("crash", 1, 1)


def test_a_deterministic_bug_ends_the_job_after_two_starts_with_the_programs_exit_code(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """Every rank raises at step 30: the first failure is restarted (it could have been the machine), the second
    is the same error at the same saved state, so the job ends with the program's own exit code (1), one line
    that says why, and no requeue even with requeue_on_failure."""
    command = own_command(tmp_path, "--bug-at", "30", steps=STEPS)
    job = LocalJob(tmp_path, spec(command, preemption="{requeue_on_failure: true}", extra=own_port(tmp_path)))
    jobs.append(job)
    assert job.finish() == 1, job.everything()
    batch = job.file("batch")
    assert batch.count("rendezvous at") == 2, batch
    assert "failed again with the same error at the same saved state ('ValueError: bad batch at step 30'): a " \
           "failure that repeats is not restarted; the job ends with the program's exit code" in batch  # fmt: skip
    assert "requeue issued" not in batch
    assert len(restarts(job)) == 1


def test_a_bug_on_rank_0_only_is_blamed_on_rank_0_not_its_casualties(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """Rank 0 alone raises at step 30, every start: the others die of it (peer loss), some before rank 0's exit
    is recorded. The cause is rank 0 both times, so the job ends after two starts with the program's exit code."""
    command = own_command(tmp_path, "--bug-at", "30", "--bug-rank", "0", steps=STEPS)
    job = LocalJob(tmp_path, spec(command, extra=own_port(tmp_path)))
    jobs.append(job)
    assert job.finish() == 1, job.everything()
    batch = job.file("batch")
    assert batch.count("rendezvous at") <= 2, batch
    assert re.search(r"rank 0 on \S+ \(exit 1\) failed again with the same error", batch), batch
    # `slurmgen logs --failed`: rank 0's log alone, named from the run history, not a casualty's.
    shown = run_slurmgen("logs", f"local-{job.job_id()}", "--failed", cwd=tmp_path, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert re.match(r"slurmgen: rank 0 on \S+ \(exit 1\) failed first, in run 1: its log\n", shown.stderr), shown.stderr
    assert "==> " in shown.stdout and "rank-0.log <==" in shown.stdout and "rank-1.log" not in shown.stdout
    assert "ValueError: bad batch at step 30" in shown.stdout
    both = run_slurmgen("logs", f"local-{job.job_id()}", "--failed", "--rank", "1", cwd=tmp_path, timeout=60)
    assert both.returncode == 2 and "--failed picks the rank itself" in both.stderr


def test_the_term_of_26_05s_mpi_plugin_after_a_ranks_bug_is_no_preemption(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """Rank 1 raises at step 30 on every start; without --kill-on-bad-exit, the fake srun's --mpi=pmix ends the
    others as Slurm 26.05's PMIx plugin does (SIGCONT, SIGTERM, SIGKILL after KillWait), so rank 0's Preemption
    takes a TERM no one sent the batch shell. The cause is rank 1 both times, the job is never requeued (even with
    requeue_on_failure, which a preemption would trigger) and ends with the program's exit code."""
    command = own_command(tmp_path, "--bug-at", "30", "--bug-rank", "1", steps=STEPS)
    extra = "srun: {kill-on-bad-exit: false, mpi: pmix}\n" + own_port(tmp_path)
    job = LocalJob(tmp_path, spec(command, preemption="{requeue_on_failure: true}", extra=extra))
    jobs.append(job)
    assert job.finish() == 1, job.everything()
    batch = job.file("batch")
    assert "the MPI plugin ends the others" in batch, batch
    assert re.search(r"rank 1 on \S+ \(exit 1\) failed again with the same error", batch), batch
    assert "requeue issued" not in batch and "FAILED, exit code 1, 1 run" in job.runner, job.runner
    events = run_history.read(str(job.cwd / "logs" / f"job-{job.job_id()}"))
    assert not [e for e in events if e.get("event") in (run_history.PREEMPTED, run_history.REQUEUE)]


def test_the_kill_rehearsal_kills_the_ranks_program_and_the_step_restarts(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """`slurmgen run --kill-rank 2 --after 10`: rank 2's own program (not slurmgen's supervisor) dies of SIGKILL at
    10 s of the first run, while it trains (200 steps take 10 s after its start); the step restarts inside the
    allocation and the job completes in one run."""
    command = own_command(tmp_path, steps=200)
    job = LocalJob(tmp_path, spec(command, extra=own_port(tmp_path)), "--kill-rank", "2", "--after", "10")
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    assert "kill rehearsal: SIGKILL to rank 2's program (pid " in job.runner, job.runner
    assert "COMPLETED, exit code 0, 1 run" in job.runner
    [event] = restarts(job)
    assert (event["rank"], event["who"]) == (2, "rank 2 on 127.0.0.2 (killed by SIGKILL)")
    assert re.search(r"DONE 200 \S+ rank=2", job.file("rank-2.log"))


def test_the_kill_rehearsal_refuses_a_rank_the_job_does_not_have(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(spec([PY, "-c", "pass"]))
    done = run_slurmgen("run", "job.yaml", "--kill-rank", "4", "--after", "1", cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "--kill-rank 4: the job has ranks 0 to 3" in done.stderr, done.stderr
    alone = run_slurmgen("run", "job.yaml", "--kill-rank", "1", cwd=tmp_path, timeout=60)
    assert alone.returncode == 2 and "--kill-rank R goes with --after SECONDS or --at-step N" in alone.stderr


def test_a_hung_rank_gets_its_stacks_written_and_the_step_restarts(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """Rank 1 stops in stuck_in_data_loader at step 50 (the others wait in their next allreduce): after
    hang_timeout (30 s: this shared 2-core machine can be silent that long in start-up) without progress on any
    rank, every rank's stacks are in <log dir>/hang/, rank 1's name the function, and the step restarts inside the
    allocation from step 40 and completes."""
    command = own_command(tmp_path, "--hang-rank", "1", "--hang-at", "50", "--hang-once", str(tmp_path / "hung"),
                          steps=STEPS)  # fmt: skip
    job = LocalJob(tmp_path, spec(command, extra="recovery: {hang_timeout: 30}\n" + own_port(tmp_path)))
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    assert "COMPLETED, exit code 0, 1 run" in job.runner
    hang_dir = tmp_path / "logs" / f"job-{job.job_id()}" / "hang"
    stacks = (hang_dir / "rank-1.stacks").read_text()
    assert stacks.startswith("rank 1 on 127.0.0.1, pid ") and "stuck_in_data_loader" in stacks, stacks
    assert sorted(p.name for p in hang_dir.glob("rank-*.stacks")) == [f"rank-{r}.stacks" for r in range(4)]
    batch = job.file("batch")
    # rank 1 named: the one not waiting in a collective while the others wait in all_reduce (stack_dump.py)
    assert "): rank 1 on 127.0.0.1 (the other ranks waited on it in torch.distributed); stacks in " in batch, batch
    assert "no progress on any rank; stopped first" in batch and " hung: restarting the step inside the allocation" \
        " (restart 1 of 3)" in batch, batch  # fmt: skip
    [event] = restarts(job)
    assert (event["cause"], event["rank"]) == ("hang", 1), event
    for rank in range(4):
        assert re.findall(r"RESUMED (\d+) ", job.file(f"rank-{rank}.log")) == ["40"], job.everything()


def test_the_hang_rehearsal_shows_a_hang_with_the_stopped_ranks_own_stacks_and_names_it_as_the_cause(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """`slurmgen run --hang-rank 1 --after 35` on 1 node x 2 ranks that all-reduce every step: rank 1's program is
    stopped (SIGSTOP) and rank 0 waits on it. While the hang lasts, `status` shows it as a hang: no rate, no ETA,
    and goodput does not rise. Then the watchdog writes rank 1's own stacks (py-spy's dump of the stopped program's
    pid, not its error) and the batch shell names rank 1, the stopped one, as the cause (not rank 0, which waited
    on it), and the step restarts. (Before: rank 1's stacks file held only py-spy's "Failed to suspend process",
    status showed a live rate, an ETA and a rising goodput, and the restart named whichever rank's output was
    oldest.) 35 s: after the first step on a busy machine (25 s here), and early enough in rank 0's sampling that
    the missed samples show before the watchdog's verdict (goodput/timeline.py, stalled_since)."""
    command = [PY, str(Path(__file__).parent / "hang_steps.py"), "100000"]
    text = spec(command, extra="recovery: {hang_timeout: 30}\n" + own_port(tmp_path))
    job = LocalJob(tmp_path, text.replace("nodes: 2\n", "nodes: 1\n"), "--hang-rank", "1", "--after", "35")
    jobs.append(job)
    job.wait_for(lambda: "SIGSTOP to rank 1's program (pid" in job.runner, timeout=120)
    [stopped] = re.findall(r"SIGSTOP to rank 1's program \(pid (\d+)\)", job.runner)
    seen: list[str] = []

    def hung_status() -> bool:
        done = run_slurmgen("status", f"local-{job.job_id()}", cwd=tmp_path, env=without_steering())
        seen.append(done.stdout)
        return "rate: none: hung, no step for " in done.stdout

    job.wait_for(hung_status, timeout=60)
    again = run_slurmgen("status", f"local-{job.job_id()}", cwd=tmp_path, env=without_steering()).stdout
    assert "eta to total_steps" not in seen[-1] and "steps/s" not in seen[-1], seen[-1]
    goodputs = [float(re.findall(r"^goodput so far: ([\d.]+)%", out, re.M)[0]) for out in (seen[-1], again)]
    assert goodputs[1] <= goodputs[0], (seen[-1], again)
    job.wait_for(lambda: restarts(job), timeout=120)
    stacks = (tmp_path / "logs" / f"job-{job.job_id()}" / "hang" / "rank-1.stacks").read_text()
    assert f"its program (pid {stopped}) is stopped" in stacks and f"Process {stopped}: " in stacks, stacks
    assert "py-spy: Error" not in stacks and "hang_steps.py" in stacks, stacks
    batch = job.file("batch")
    assert "stopped first (at " in batch and "): rank 1 on 127.0.0.1 (its program was stopped); stacks in " in batch
    [event] = restarts(job)
    assert (event["cause"], event["rank"]) == ("hang", 1), event


def test_a_rank_that_raises_and_exits_last_is_the_cause_not_its_casualties(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """1 node x 2 ranks: rank 1 raises ValueError, and its atexit hooks close its process group and then wait
    3 s; rank 0 loses its peer and exits 76 first, and srun's --kill-on-bad-exit ends rank 1 with SIGTERM in its
    atexit wait. The start-up hook recorded rank 1's exception when it was raised: the batch log names rank 1 and
    its error, and the job ends FAILED with the program's own code, 1. (Before: FAILED 76, "rank 0 ... failed
    first: its program exited with code 76", a casualty.)"""
    command = [PY, str(Path(__file__).parent / "raise_last.py"), "400"]
    text = spec(command, preemption="{handler: runtime}", extra="recovery: {max_restarts: 0}\n" + own_port(tmp_path))
    job = LocalJob(tmp_path, text.replace("nodes: 2\n", "nodes: 1\n"))
    jobs.append(job)
    assert job.finish() == 1, job.everything()
    assert "FAILED, exit code 1" in job.runner, job.runner
    events = run_history.read(str(tmp_path / "logs" / f"job-{job.job_id()}"))
    exits = {e["rank"]: e for e in events if e.get("event") == run_history.TASK_EXIT}
    assert exits[0]["exit_code"] == 76, exits  # the casualty exited first, with the peer-loss code
    assert exits[1]["raised"] == "ValueError: bad batch at step 20" and exits[1]["exit_code"] == 1, exits
    assert exits[1]["raised_at"] < exits[0]["time"], exits
    batch = job.file("batch")
    assert "rank 1 on 127.0.0.1 failed first: its program raised ValueError: bad batch at step 20" in batch, batch
    assert "failed first: its program exited with code 76" not in batch, batch
    [end] = [e for e in events if e.get("event") == run_history.RUN_END]
    assert (end["exit_code"], end["failing"]) == (1, "rank 1 on 127.0.0.1 (exit 1)"), end


def test_a_restart_after_a_taken_rendezvous_port_says_why(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """A setup line holds the first start's rendezvous port (base + job id % 2) as another process's listener:
    rank 0's store cannot listen and the step fails; it restarts on the next port of the range and completes. The
    restart says why in the batch log and the history: "rendezvous failed: port N in use". (Before, the batch log
    showed two rendezvous ports and a restart line naming only "rank 0 ... (exit 1)".)"""
    base = 20000 + zlib.crc32(str(tmp_path).encode()) % 9000
    holder = Path(__file__).parent / "port_holder.py"
    hold = f"{PY} {holder} $(({base} + SLURM_JOB_ID % 2)) 300 > {tmp_path / 'holder.out'} & sleep 1"
    command = own_command(tmp_path, steps=60)
    text = spec(command, extra=f"distributed: {{port: {base}, port_range: 2}}\nsetup: [{hold!r}]\n")
    job = LocalJob(tmp_path, text.replace("nodes: 2\n", "nodes: 1\n"))
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    held = int((tmp_path / "holder.out").read_text().split()[1])
    batch = job.file("batch")
    assert f"rendezvous at 127.0.0.1:{held}\n" in batch, batch
    assert re.search(rf"rank 0 on \S+ \(exit 1\) failed \(rendezvous failed: port {held} in use\): restarting", batch)
    [event] = restarts(job)
    assert event["reason"] == f"rendezvous failed: port {held} in use", event
    shown = run_slurmgen("history", f"local-{job.job_id()}", cwd=tmp_path, timeout=60)
    assert f"(exit 1) (rendezvous failed: port {held} in use)" in shown.stdout, shown.stdout
