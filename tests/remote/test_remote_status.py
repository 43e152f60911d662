"""Remote status: every job's state from one round trip (squeue for live jobs, sacct for finished ones, scontrol
where accounting is off, then the run's own records), COMPLETING never final; and Slurm's commands through ssh."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from ssh_server import Sshd, start_sshd

from slurmgen.backends.slurm_ssh.remote_status import SECTION, RemoteState, decide, remote_states, transport_runner
from slurmgen.remote.transport import SshTransport
from slurmgen.slurm.client import SlurmClient
from slurmgen.slurm.parse import SQUEUE_SEPARATOR

S = SQUEUE_SEPARATOR


def squeue_row(job: str, state: str) -> str:
    return S.join([job, job, state, "None", "0:01", "10:00", "1", "node1", "debug", "t"])


def show_row(job: str, state: str, exit_code: str = "0:0") -> str:
    return f"JobId={job} JobName=t JobState={state} Reason=None Restarts=0 ExitCode={exit_code} NumNodes=1"


def record(*events: dict[str, object]) -> str:
    return "\n".join(json.dumps({"v": 1, "run": 1, "time": 1.0, "by": "batch-shell", **e}) for e in events)


def answer(squeue: str = "", sacct: str = "", scontrol: str = "", records: dict[str, str] | None = None) -> str:
    text = f"{SECTION}squeue\n{squeue}\n{SECTION}sacct\n{sacct}\n{SECTION}scontrol\n{scontrol}\n"
    for job, lines in (records or {}).items():
        text += f"{SECTION}record {job}\n{lines}\n"
    return text


END_OK = record({"event": "run-start"}, {"event": "run-end", "exit_code": 0, "ended": "completed"})
END_BAD = record({"event": "run-start"}, {"event": "run-end", "exit_code": 3, "ended": "failed"})

# (what the one call answered, the state decided)
CASES = [
    (answer(squeue=squeue_row("5", "RUNNING")), RemoteState("RUNNING", "squeue")),
    (answer(squeue=squeue_row("5", "PENDING"), sacct="5|PENDING|0:0"), RemoteState("PENDING", "squeue")),
    # squeue still lists it, finished: sacct is the record of the end
    (answer(squeue=squeue_row("5", "COMPLETED"), sacct="5|COMPLETED|0:0"), RemoteState("COMPLETED", "sacct", 0)),
    (answer(sacct="5|FAILED|2:0"), RemoteState("FAILED", "sacct", 2)),  # Slurm forgot it; accounting has it
    (answer(sacct="5|CANCELLED by 0|0:15"), RemoteState("CANCELLED", "sacct", 0)),
    # COMPLETING is never final: its processes may still run
    (answer(squeue=squeue_row("5", "COMPLETING"), sacct="5|FAILED|1:0"), RemoteState("COMPLETING", "squeue")),
    (answer(sacct="@@no-accounting", scontrol=show_row("5", "COMPLETING")), RemoteState("COMPLETING", "scontrol")),
    # accounting off: scontrol while Slurm keeps the job (MinJobAge), then the run's records
    (answer(sacct="@@no-accounting", scontrol=show_row("5", "TIMEOUT", "0:15")), RemoteState("TIMEOUT", "scontrol", 0)),
    # (a record's one run: no requeue, no restart of the step)
    (answer(sacct="@@no-accounting", records={"5": END_OK}), RemoteState("COMPLETED", "record", 0, 0, 0)),
    (answer(sacct="@@no-accounting", records={"5": END_BAD + "\n{cut"}), RemoteState("FAILED", "record", 3, 0, 0)),
    (
        answer(sacct="@@no-accounting", records={"5": record({"event": "run-start"})}),
        RemoteState("UNKNOWN", "none", None, 0, 0),
    ),
    (answer(sacct="@@no-accounting"), RemoteState("UNKNOWN", "none")),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_each_source_answers_in_its_turn(text: str, expected: RemoteState) -> None:
    assert decide(["5"], text) == {"5": expected}


@pytest.fixture
def login(tmp_path: Path) -> Iterator[tuple[Sshd, SshTransport]]:
    """A login node whose Slurm answers as recorded: job 1 running, 2 forgotten by Slurm and kept by accounting,
    3..100 finished and still in scontrol."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    rows = "\n".join(squeue_row(str(j), "RUNNING") for j in (1,))
    shows = "\n".join(show_row(str(j), "COMPLETED") for j in range(3, 101))
    commands = {
        "squeue": f"cat <<'X'\n{rows}\nX",
        "sacct": "echo '2|COMPLETED|0:0'",
        "scontrol": f'[ "$1 $2 $3" = "show job -o" ] || exit 1\ncat <<\'X\' | grep "^JobId=${4:-}"\n{shows}\nX',
        "scancel": 'echo "scancel: error: Kill job error on job id $1: Invalid job id specified" >&2; exit 1',
    }
    for name, body in commands.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    server = start_sshd(path_prepend=str(bin_dir))
    t = server.transport()
    yield server, t
    server.close_master()
    server.remove()


def test_status_of_a_hundred_jobs_is_one_round_trip(login: tuple[Sshd, SshTransport]) -> None:
    server, t = login
    t.run("true")
    before = server.sessions()
    states = remote_states(t, [str(j) for j in range(1, 101)], {})
    assert server.sessions() - before == 1
    assert states["1"] == RemoteState("RUNNING", "squeue")
    assert states["2"] == RemoteState("COMPLETED", "sacct", 0)
    assert {states[str(j)] for j in range(3, 101)} == {RemoteState("COMPLETED", "scontrol", 0)}


def test_slurm_commands_through_ssh_keep_their_errors_apart_from_the_login_noise(
    login: tuple[Sshd, SshTransport],
) -> None:
    _, t = login
    client = SlurmClient(run=transport_runner(t))
    assert [str(e.job_id) for e in client.squeue(["1"])] == ["1"]
    done = transport_runner(t)(["scancel", "7"], None, 30)
    assert done.returncode == 1 and done.stderr.strip().endswith("Invalid job id specified")
    assert "Welcome" not in done.stderr + done.stdout


def end_with(code: int) -> str:
    return record({"event": "run-start"}, {"event": "run-end", "exit_code": code, "ended": "failed"})


def test_sacct_exit_codes_by_the_rule_of_the_clusters_version() -> None:
    """The handwritten sacct rows of jobs that exited 3 and 143 (tests/data/slurm/handwritten-sacct-exit-*): from
    25.11 sacct's code is the job's own; before it 143 reads 15, and the job's code comes from scontrol while Slurm
    has the job, else from the run's record where it agrees (15 or 15 + 128), else as sacct printed it."""
    from recorded import recorded_text

    jobs = ["41", "42", "43", "44"]
    new = decide(jobs, answer(sacct="slurm 25.11.7\n" + recorded_text("handwritten-sacct-exit-25.11.out")))
    assert [(s.state, s.exit_code) for s in new.values()] == [("FAILED", 3), ("FAILED", 143), ("CANCELLED", 0),
                                                                ("COMPLETED", 0)]  # fmt: skip
    assert {s.source for s in new.values()} == {"sacct"}
    old_rows = "slurm 25.05.4\n" + recorded_text("handwritten-sacct-exit-25.05.out")
    assert decide(["42"], answer(sacct=old_rows))["42"] == RemoteState("FAILED", "sacct", 15)  # nothing better
    by_scontrol = decide(["42"], answer(sacct=old_rows, scontrol=show_row("42", "FAILED", "143:0")))
    assert by_scontrol["42"] == RemoteState("FAILED", "scontrol", 143)
    by_record = decide(["42", "41"], answer(sacct=old_rows, records={"42": end_with(143), "41": end_with(7)}))
    assert by_record["42"] == RemoteState("FAILED", "sacct", 143, 0, 0)
    assert by_record["41"] == RemoteState("FAILED", "sacct", 3, 0, 0)  # a record that disagrees is not taken
    # 25.11's sacct with the same scontrol answer keeps its own exact code
    assert decide(["42"], answer(sacct="slurm 25.11.7\n42|FAILED|143:0", scontrol=show_row("42", "FAILED", "1:0"))
                  )["42"] == RemoteState("FAILED", "sacct", 143)  # fmt: skip


def test_a_remote_jobs_requeues_and_step_restarts_are_read_from_its_record_in_the_same_round_trip() -> None:
    """status of a remote job shows REQUEUES and STEP RESTARTS beside each other, as on the login node: from the
    batch shell's record that the one round trip reads anyway (run starts, restarts of the step); blank where no
    record was read."""
    from slurmgen.backends.slurm_ssh.job import remote_row

    story = record({"event": "run-start", "run": 1}, {"event": "restart", "run": 1}, {"event": "restart", "run": 1},
                   {"event": "run-end", "run": 1, "exit_code": 0, "ended": "requeued"},
                   {"event": "run-start", "run": 2})  # fmt: skip
    states = decide(["5", "6"], answer(squeue=squeue_row("5", "RUNNING"), records={"5": story}))
    assert (states["5"].requeues, states["5"].step_restarts) == (1, 2)
    assert (states["6"].requeues, states["6"].step_restarts) == (None, None)
    row = remote_row("5", "scen", states["5"])
    assert (row.restarts, row.step_restarts) == ("1", "2")
    assert (remote_row("6", "x", states["6"]).restarts, remote_row("6", "x", states["6"]).step_restarts) == ("", "")
