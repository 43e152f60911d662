"""`slurmgen run --local`: the emulated job environment, the fake srun and scontrol, and whole local runs with
real processes and real signals (the CPU example with torch; Ctrl-C without).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen, slurmgen_argv
from runtime.runtime_helpers import without_steering

from slurmgen import run_history
from slurmgen.errors import SpecError, UsageError
from slurmgen.local import jobenv, procs, setup
from slurmgen.local.fake_scontrol import NO_REQUEUE, PREEMPTED, REQUEUE_REQUEST
from slurmgen.local.runner import fake_wrapper
from slurmgen.local.srun_args import SrunError, parse_args, step_shape
from slurmgen.script.shell_words import Shell
from slurmgen.script.step import srun_words
from slurmgen.slurm.client import InvalidJobId, JobPending, RequeueDisabled, SlurmClient
from slurmgen.slurm.hostlist import expand_hostlist
from slurmgen.slurm.ids import JobState
from slurmgen.spec.load import load_file

ROOT = Path(__file__).resolve().parent.parent.parent
JOBS = ROOT / "jobs"
PARENT = str(ROOT)  # where the slurmgen package is importable from


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without anything that would steer a job (an enclosing allocation, a developer's MASTER_*)."""
    return {**without_steering(), **extra}


# --- the emulated environment, on plain values ---------------------------------------------------------------


def test_node_names_are_loopback_literals_written_as_a_hostlist() -> None:
    assert jobenv.nodelist(1) == "127.0.0.1"
    assert jobenv.nodelist(2) == "127.0.0.[1-2]"
    for count in (1, 2, 7, jobenv.MAX_NODES):
        assert expand_hostlist(jobenv.nodelist(count)) == jobenv.node_names(count)
    with pytest.raises(ValueError, match="1 to 254"):
        jobenv.node_names(255)


def test_tasks_per_node_in_slurms_compressed_form() -> None:
    assert jobenv.tasks_per_node_text([2]) == "2"
    assert jobenv.tasks_per_node_text([2, 2, 2]) == "2(x3)"
    assert jobenv.tasks_per_node_text([2, 2, 2, 1]) == "2(x3),1"


def shape(**kw: object) -> jobenv.JobShape:
    values: dict[str, object] = dict(
        job_id="7", name="demo", nodes=2, tasks_per_node=2, cpus_per_task=1, submit_dir="/w", submit_host="box"
    )
    values.update(kw)
    return jobenv.JobShape(**values)  # type: ignore[arg-type]


def test_batch_env_is_what_slurmd_gives_the_batch_shell() -> None:
    base = {"PATH": "/usr/bin", "HOME": "/h", "SLURM_JOB_ID": "999", "SBATCH_PARTITION": "x", "SLURM_CONF": "/c"}
    env = jobenv.batch_env(shape(), base, "/w/.slurmgen/local/7", ["/fake/bin", "/venv/bin"])
    assert env["SLURM_JOB_ID"] == env["SLURM_JOBID"] == "7"  # the enclosing allocation's id is gone
    assert "SBATCH_PARTITION" not in env and "SLURM_CONF" not in env
    assert env["HOME"] == "/h"  # sbatch --export=ALL
    assert env["SLURM_JOB_NODELIST"] == env["SLURM_NODELIST"] == "127.0.0.[1-2]"
    assert (env["SLURM_JOB_NUM_NODES"], env["SLURM_NNODES"], env["SLURM_NTASKS"]) == ("2", "2", "4")
    assert (env["SLURM_NTASKS_PER_NODE"], env["SLURM_TASKS_PER_NODE"]) == ("2", "2(x2)")
    assert (env["SLURM_CPUS_PER_TASK"], env["SLURM_SUBMIT_DIR"], env["SLURM_CLUSTER_NAME"]) == ("1", "/w", "local")
    assert env["SLURMD_NODENAME"] == "127.0.0.1"
    assert "SLURM_RESTART_COUNT" not in env  # unset on the first run, as Slurm up to 25.11 does
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # a CPU run never picks up a GPU
    assert env["PATH"] == "/fake/bin:/venv/bin:/usr/bin"
    assert env[jobenv.LOCAL_DIR] == "/w/.slurmgen/local/7"
    again = jobenv.batch_env(shape(restart_count=2, cpus_per_task=None), base, "/c", [])
    assert again["SLURM_RESTART_COUNT"] == "2"
    assert "SLURM_CPUS_PER_TASK" not in again


def test_task_env_block_distribution() -> None:
    step = jobenv.StepShape("7", 0, ("127.0.0.1", "127.0.0.2"), 2, hostlist="127.0.0.[1-2]", gpus=(("0",), ("1",)))
    seen = []
    for node in range(2):
        for local in range(2):
            env = jobenv.task_env({"SLURM_JOB_ID": "7"}, step, node, local)
            seen.append((env["SLURM_PROCID"], env["SLURM_LOCALID"], env["SLURM_NODEID"], env["SLURMD_NODENAME"]))
            assert env["SLURM_STEP_NODELIST"] == "127.0.0.[1-2]"
            assert (env["SLURM_NTASKS"], env["SLURM_STEP_TASKS_PER_NODE"], env["SLURM_STEP_ID"]) == ("4", "2(x2)", "0")
            assert env["CUDA_VISIBLE_DEVICES"] == str(node)
    assert seen == [
        ("0", "0", "0", "127.0.0.1"),
        ("1", "1", "0", "127.0.0.1"),
        ("2", "0", "1", "127.0.0.2"),
        ("3", "1", "1", "127.0.0.2"),
    ]
    assert jobenv.task_env({}, step, 1, 0)["SLURM_GTIDS"] == "2,3"


def test_output_patterns() -> None:
    kw = dict(job_id="7", step_id=1, node="127.0.0.2", node_index=1, task_id=3, user="me", job_name="demo")
    assert jobenv.expand_output("/l/%N.log", **kw) == "/l/127.0.0.2.log"  # type: ignore[arg-type]
    assert jobenv.expand_output("%x-%j.%s-%n-%3t-%u-%J%%", **kw) == "demo-7.1-1-003-me-7.1%"  # type: ignore[arg-type]


def test_gpus_visible_and_sliced_per_node() -> None:
    assert jobenv.visible_gpus({}, ["null", "nvidia1", "nvidia0", "nvidiactl", "nvidia-uvm"]) == ["0", "1"]
    assert jobenv.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}, ["nvidia0"]) == ["2", "3"]
    assert jobenv.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, ["nvidia0"]) == []
    assert jobenv.gpu_slices(["0", "1", "2", "3"], 2, 2) == (("0", "1"), ("2", "3"))
    assert jobenv.gpu_slices(["0", "1", "2"], 2, 2) is None
    assert jobenv.parse_gpus("0,1;2,3") == (("0", "1"), ("2", "3"))


# --- the spec as it runs here, and the timeline ----------------------------------------------------------------


def test_overrides_and_cpu_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The example specs, in a directory that holds the train.py they name: a local run refuses a command script
    that is not where the job runs (before it starts), and the scripts of these examples are the user's."""
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs")
    (tmp_path / "train.py").write_text("")
    monkeypatch.chdir(tmp_path)
    loaded = setup.load("jobs/cpu-debug.yaml", setup.Options(nodes=3, tasks_per_node=1), [])
    assert (loaded.spec.nodes, loaded.spec.tasks_per_node, loaded.gpus, loaded.notes) == (3, 1, None, ())
    assert "#SBATCH --nodes='3'" in loaded.script
    gpu = setup.load("jobs/gpu-1node-8gpu.yaml", setup.Options(), [])
    assert (gpu.spec.gpus_per_node, gpu.spec.tasks_per_node, gpu.spec.distributed.backend) == (0, 8, "gloo")
    assert gpu.notes[0].startswith("no GPU here, 8 needed: running on CPU with gpus_per_node=0")
    torchrun = setup.load("jobs/gpu-2node-torchrun.yaml", setup.Options(tasks_per_node=2), ["0"])
    assert (torchrun.spec.tasks_per_node, torchrun.spec.nproc_per_node, torchrun.spec.gpus_per_node) == (1, 2, 0)
    container = setup.load("jobs/container.yaml", setup.Options(), [])
    assert container.notes[1].startswith("the image nvcr.io#nvidia/pytorch:24.05-py3 is not used locally")
    apptainer = setup.load("jobs/container-apptainer.yaml", setup.Options(), [])
    assert apptainer.notes[1] == ("tasks run in /shared/images/pytorch-24.05.sif through apptainer, which must work "
                                  "here")  # fmt: skip
    enough = setup.load("jobs/gpu-1node-8gpu.yaml", setup.Options(), [str(i) for i in range(8)])
    assert (enough.spec.gpus_per_node, enough.gpus, enough.notes) == (8, (tuple(str(i) for i in range(8)),), ())


def test_what_a_local_run_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    with pytest.raises(UsageError, match="preemption is off"):
        setup.load("jobs/cpu-debug.yaml", setup.Options(overrides=("preemption=false",), preempt_after=5), [])
    with pytest.raises(UsageError, match="above 0"):
        setup.load("jobs/cpu-debug.yaml", setup.Options(preempt_after=0), [])
    with pytest.raises(SpecError, match="--set: nodes"):
        setup.load("jobs/cpu-debug.yaml", setup.Options(nodes=0), [])


def test_timeline_preempts_the_first_run_only() -> None:
    spec = load_file(JOBS / "cpu-debug.yaml").spec  # 10 min, lead 120 s
    first = setup.timeline(spec, 1, 20)
    assert [(e.at, e.kind) for e in first] == [(20, "preempt"), (480, "warn"), (600, "limit")]
    assert [e.kind for e in setup.timeline(spec, 2, 20)] == ["warn", "limit"]


def test_job_ids_count_up_and_skip_ids_in_use(tmp_path: Path) -> None:
    spec = load_file(JOBS / "cpu-debug.yaml").spec
    home = tmp_path / ".slurmgen"
    (tmp_path / "logs" / "state").mkdir(parents=True)
    (tmp_path / "logs" / "state" / "2.state").write_bytes(b"old")  # a stale state must never be resumed
    busy = setup.rendezvous_port(spec, "3")
    taken = setup.id_taken(spec, home, tmp_path, free=lambda port: port != busy)
    assert [setup.new_job_id(home, taken) for _ in range(3)] == ["1", "4", "5"]


def test_parse_proc_stat_with_odd_command_names() -> None:
    assert procs.parse_stat("42 (a) b (c)) S 1 42 42 0 -1") == (42, "S", 1, 42)


# --- the fake srun: its command line, then real processes --------------------------------------------------------


def rendered_srun(job: str) -> list[str]:
    """The srun options exactly as the renderer writes them, shell words expanded as the batch shell would."""
    words = srun_words(load_file(JOBS / job).spec)
    out = []
    for word in words[1:]:
        if isinstance(word, Shell) and word.startswith("${_sg_nodes:+"):
            continue  # the checked nodes (batch/nodes.py): nothing before the batch shell sets them
        if isinstance(word, Shell):
            word = word.replace('"${SLURMGEN_LOG_DIR}', "/l").replace('"${_sg_pkg}', "/p").replace('"', "")
            word = word.replace("${SLURMGEN_STATE_DIR}", "/s")
        out.append(word)
    return out


def test_fake_srun_understands_what_slurmgen_renders() -> None:
    args = parse_args([*rendered_srun("cpu-debug.yaml"), "python3", "-m", "x"])
    assert (args.nodes, args.tasks_per_node, args.cpus_per_task, args.kill_on_bad_exit) == (2, 2, 1, True)
    assert (args.output, args.open_mode, args.command, args.ignored) == (
        "/l/%N.log",
        "append",
        ("python3", "-m", "x"),
        (),
    )
    container = parse_args([*rendered_srun("container.yaml"), "python"])
    assert [w.split("=")[0] for w in container.ignored] == [
        "--container-image",
        "--container-mounts",
        "--container-workdir",
        "--no-container-mount-home",
    ]
    spaced = parse_args(["-N", "1", "--ntasks-per-node", "3", "-K", "-o", "x.log", "--", "prog", "--nodes=9"])
    assert (spaced.nodes, spaced.tasks_per_node, spaced.kill_on_bad_exit, spaced.command) == (
        1,
        3,
        True,
        ("prog", "--nodes=9"),
    )


def test_fake_srun_accepts_the_placement_options_of_the_specs_srun_and_names_them() -> None:
    args = parse_args(["--kill-on-bad-exit=0", "--label", "--distribution=block", "--mpi=pmix", "prog", "--label"])
    assert (args.kill_on_bad_exit, args.unplaced, args.command) == (
        False,
        ("--label", "--distribution=block", "--mpi=pmix"),
        ("prog", "--label"),
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--exclusive", "prog"], "not emulated"),
        (["--nodes=0", "prog"], "positive"),
        (["--open-mode=sideways", "prog"], "append or truncate"),
        (["--nodes=2"], "no command"),
        (["--output"], "needs a value"),
    ],
)
def test_fake_srun_refuses_what_it_does_not_emulate(argv: list[str], message: str) -> None:
    with pytest.raises(SrunError, match=message):
        parse_args(argv)


def test_step_inside_the_job() -> None:
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "127.0.0.[1-3]", "SLURM_NTASKS_PER_NODE": "2"}
    step = step_shape(parse_args(["--nodes=2", "prog"]), env, 1)
    assert (step.hosts, step.tasks_per_node, step.hostlist, step.step_id) == (("127.0.0.1", "127.0.0.2"), 2, "", 1)
    with pytest.raises(SrunError, match="the job has 3 nodes, asked for 4"):
        step_shape(parse_args(["--nodes=4", "prog"]), env, 0)
    with pytest.raises(SrunError, match="not inside a job"):
        step_shape(parse_args(["prog"]), {}, 0)


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, module in (("srun", "slurmgen.local.fake_srun"), ("scontrol", "slurmgen.local.fake_scontrol")):
        (bin_dir / name).write_text(fake_wrapper(sys.executable, module, PARENT))
        (bin_dir / name).chmod(0o700)
    return bin_dir


def job_env(tmp_path: Path, fake_bin: Path) -> dict[str, str]:
    return clean_env(
        PATH=f"{fake_bin}:{os.environ['PATH']}",
        SLURM_JOB_ID="7",
        SLURM_JOB_NAME="demo",
        SLURM_JOB_NODELIST="127.0.0.[1-2]",
        SLURM_NTASKS_PER_NODE="2",
        SLURMGEN_LOCAL_DIR=str(tmp_path),
        SLURMGEN_LOCAL_KILL_WAIT="5",
    )


@pytest.fixture
def session_procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes started in their own session; their whole group is killed at the end whatever happened."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        procs.signal_process(proc.pid, signal.SIGKILL, group=True)
        proc.wait()


def srun(
    args: list[str], tmp_path: Path, fake_bin: Path, started: list[subprocess.Popen[str]]
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        ["srun", *args], env=job_env(tmp_path, fake_bin), cwd=tmp_path, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    started.append(proc)
    return proc


def test_fake_srun_starts_every_task_with_its_ranks_and_one_log_per_node(
    tmp_path: Path, fake_bin: Path, session_procs: list[subprocess.Popen[str]]
) -> None:
    show = 'echo "$SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURMD_NODENAME $SLURM_STEP_ID $SLURM_STEP_NODELIST"'
    for _ in range(2):  # a second step appends, with the next step id
        proc = srun(["--output=%N.log", "--open-mode=append", "sh", "-c", show], tmp_path, fake_bin, session_procs)
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    node1 = sorted((tmp_path / "127.0.0.1.log").read_text().splitlines())
    node2 = sorted((tmp_path / "127.0.0.2.log").read_text().splitlines())
    assert node1 == sorted(f"{r} {r} 0 127.0.0.1 {s} 127.0.0.[1-2]" for r in (0, 1) for s in (0, 1))
    assert node2 == sorted(f"{r} {r - 2} 1 127.0.0.2 {s} 127.0.0.[1-2]" for r in (2, 3) for s in (0, 1))


def test_fake_srun_kill_on_bad_exit_and_highest_exit_code(
    tmp_path: Path, fake_bin: Path, session_procs: list[subprocess.Popen[str]]
) -> None:
    task = 'if [ "$SLURM_PROCID" = 1 ]; then exit 3; fi; exec sleep 60'
    started = time.monotonic()
    proc = srun(["--kill-on-bad-exit=1", "sh", "-c", task], tmp_path, fake_bin, session_procs)
    code = proc.wait(timeout=60)
    err = proc.stderr.read() if proc.stderr else ""
    assert time.monotonic() - started < 30  # not the 60 s sleep: the others were ended
    assert "task 1: Exited with exit code 3" in err and "Terminating StepId=7.0" in err
    assert code == 128 + signal.SIGTERM  # the highest: the others died of SIGTERM


def test_fake_srun_with_pmix_ends_the_others_with_term_as_slurm_26_05(
    tmp_path: Path, fake_bin: Path, session_procs: list[subprocess.Popen[str]]
) -> None:
    """--mpi=pmix without --kill-on-bad-exit: task 1 exits 3 and the others, which note the TERM and exit, get
    SIGCONT and SIGTERM (26.05's PMIx error handler), not a bare SIGKILL; without --mpi they run on."""
    task = ('if [ "$SLURM_PROCID" = 1 ]; then sleep 1; exit 3; fi; '
            f'trap \'echo "TERM $SLURM_PROCID" >> {tmp_path}/terms; exit 143\' TERM; '
            'while :; do sleep 0.05; done')  # fmt: skip
    proc = srun(["--kill-on-bad-exit=0", "--mpi=pmix", "sh", "-c", task], tmp_path, fake_bin, session_procs)
    code = proc.wait(timeout=60)
    err = proc.stderr.read() if proc.stderr else ""
    assert "task 1: Exited with exit code 3" in err and "the MPI plugin ends the others" in err, err
    assert code == 143 and sorted((tmp_path / "terms").read_text().split("\n")[:-1]) == ["TERM 0", "TERM 2",
                                                                                        "TERM 3"]  # fmt: skip
    assert parse_args(["--mpi=pmi2", "p"]).mpi_abort and not parse_args(["--mpi=none", "p"]).mpi_abort


def test_fake_srun_forwards_signals_to_every_task(
    tmp_path: Path, fake_bin: Path, session_procs: list[subprocess.Popen[str]]
) -> None:
    task = "trap 'echo \"got USR1 $SLURM_PROCID\"; exit 0' USR1; echo ready; while :; do sleep 0.05; done"
    proc = srun(["--output=out-%t", "sh", "-c", task], tmp_path, fake_bin, session_procs)
    logs = [tmp_path / f"out-{rank}" for rank in range(4)]
    deadline = time.monotonic() + 60
    while not all(p.exists() and "ready" in p.read_text() for p in logs):
        assert time.monotonic() < deadline, "the tasks did not start"
        time.sleep(0.05)
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=30) == 0
    # Like Slurm, the signal reaches every process of each task (its `sleep` child too, which dies of it).
    for rank, path in enumerate(logs):
        text = path.read_text()
        assert text.startswith("ready") and f"got USR1 {rank}" in text, text


# --- the fake scontrol, through slurmgen's own Slurm client --------------------------------------------------------


def test_fake_scontrol_answers_requeue_as_slurm_does(tmp_path: Path, fake_bin: Path) -> None:
    client = SlurmClient(env=job_env(tmp_path, fake_bin))
    client.requeue("7", incomplete=True)
    assert (tmp_path / REQUEUE_REQUEST).read_text().startswith("job=7 incomplete=1")
    client.requeue("7", incomplete=True)  # no longer running: a no-op with Incomplete
    with pytest.raises(JobPending):
        client.requeue("7")
    with pytest.raises(InvalidJobId):
        client.requeue("8")
    (tmp_path / REQUEUE_REQUEST).unlink()
    (tmp_path / NO_REQUEUE).touch()
    with pytest.raises(RequeueDisabled):
        client.requeue("7", incomplete=True)
    assert client.show_hostnames("127.0.0.[1-3]") == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    result = subprocess.run(
        ["scontrol", "show", "config"], env=job_env(tmp_path, fake_bin), capture_output=True, text=True
    )
    assert result.returncode == 1 and "not emulated locally" in result.stderr


def test_fake_scontrol_shows_the_job_as_slurmctld_would(tmp_path: Path, fake_bin: Path) -> None:
    client = SlurmClient(env=job_env(tmp_path, fake_bin))
    info = client.show_job("7")
    assert info is not None and (info.state, info.restarts, info.preempt_time) == (JobState.RUNNING, 0, None)
    (tmp_path / PREEMPTED).write_text("2026-11-23T10:00:00\n")  # the runner rehearses a preemption
    client.requeue("7", incomplete=True)
    info = client.show_job("7")
    assert info is not None and (info.state, info.restarts) == (JobState.COMPLETING, 1)
    assert info.preempt_time is not None and info.preempt_time.hour == 10
    assert client.show_job("8") is None  # "Invalid job id specified"


# --- whole local runs ---------------------------------------------------------------------------------------------


def workdir(tmp_path: Path) -> Path:
    """A project directory with the CPU example, so logs, state and .slurmgen stay inside the test."""
    (tmp_path / "jobs").mkdir()
    for name in ("cpu-debug.yaml", "train_tiny.py"):
        (tmp_path / "jobs" / name).write_text((JOBS / name).read_text())
    return tmp_path


def slurmgen_run(cwd: Path, *args: str, stderr: Path) -> subprocess.Popen[bytes]:
    with open(stderr, "wb") as err:
        return subprocess.Popen(slurmgen_argv("run", "--local", *args), cwd=cwd, env=clean_env(), stderr=err)


FAST = 'command=[python3, jobs/train_tiny.py, --steps, "300"]'  # no sleep between steps
RANK_LINE = re.compile(
    r"rank (?P<rank>\d)/4: start at step (?P<step>\d+) on \S+, run (?P<run>\d), last stop: [^\s,]+, "
    r"master [^\s,]+, local rank (?P<local>\d)"
)
WEIGHTS = r"(-?\d+\.\d+)"


def logs_of(cwd: Path) -> str:
    """Everything a failed local run wrote, for the assertion message."""
    files = [cwd / "runner.err", *sorted((cwd / "logs").rglob("*.log"))]
    return "\n".join(f"--- {f.relative_to(cwd)}\n{f.read_text()[-3000:]}" for f in files if f.is_file())


def job_dir(cwd: Path) -> Path:
    """The job's own log directory (`logs/cpu-debug-<id>`: the id is 1 unless its rendezvous port was taken)."""
    (found,) = [p for p in (cwd / "logs").glob("cpu-debug-*") if p.is_dir()]
    return found


def ranks_text(cwd: Path) -> str:
    """What the four ranks printed (their own logs, rank-<N>.log), rank by rank."""
    return "".join((job_dir(cwd) / f"rank-{rank}.log").read_text() for rank in range(4))


def final_weights(text: str) -> str:
    found = re.findall(r"rank 0/4: final weights " + WEIGHTS, text)
    assert len(found) == 1, text
    return str(found[0])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path, float]:
    """One 2-node x 2-task run of the CPU example, start to end: (exit code, runner's stderr, workdir, seconds)."""
    cwd = workdir(tmp_path_factory.mktemp("local-run"))
    started = time.monotonic()
    proc = slurmgen_run(cwd, "jobs/cpu-debug.yaml", "--set", FAST, stderr=cwd / "runner.err")
    try:
        code = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    return code, (cwd / "runner.err").read_text(), cwd, time.monotonic() - started


@pytest.mark.slow
@pytest.mark.torch
def test_two_nodes_two_tasks_complete_with_correct_ranks(uninterrupted: tuple[int, str, Path, float]) -> None:
    code, err, cwd, _ = uninterrupted
    assert code == 0, logs_of(cwd)
    job = job_dir(cwd).name.removeprefix("cpu-debug-")
    assert f"local-{job}: cpu-debug, 2 nodes x 2 tasks on 127.0.0.[1-2] (gloo)" in err
    assert f"local-{job}: COMPLETED, exit code 0, 1 run in" in err
    assert (cwd / "logs" / f"cpu-debug-{job}.log").read_text().count("step ended with exit code 0") == 1
    placed = []
    for rank in range(4):
        text = (job_dir(cwd) / f"rank-{rank}.log").read_text()  # where the real job puts them
        placed += [(int(m["rank"]), int(m["local"])) for m in RANK_LINE.finditer(text)]
        assert all(m["step"] == "0" and m["run"] == "1" for m in RANK_LINE.finditer(text))
        assert text.count("done after 300 steps, all_reduce=10") == 1
    assert placed == [(0, 0), (1, 1), (2, 0), (3, 1)]  # block distribution: two ranks per node
    assert not (cwd / ".slurmgen" / "journal.jsonl").exists()  # Slurm's job 1 is not this one
    journal = (cwd / ".slurmgen" / "local" / "journal.jsonl").read_text()
    assert '"event":"local"' in journal and '"cluster":"local"' in journal and '"state":"COMPLETED"' in journal


def run_to_completion(cwd: Path, *args: str, spec: str = "jobs/cpu-debug.yaml", code: int = 0) -> str:
    """`slurmgen run --local SPEC ARGS` must exit with ``code``; its stderr (the runner's progress lines)."""
    proc = slurmgen_run(cwd, spec, *args, stderr=cwd / "runner.err")
    try:
        assert proc.wait(timeout=600) == code, logs_of(cwd) + (cwd / "runner.err").read_text()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    err = (cwd / "runner.err").read_text()
    return err


@pytest.mark.slow
@pytest.mark.torch
def test_preempt_after_saves_requeues_and_resumes_to_the_same_weights(
    tmp_path: Path, uninterrupted: tuple[int, str, Path, float]
) -> None:
    code, _, first, _ = uninterrupted
    assert code == 0, logs_of(first)
    cwd = workdir(tmp_path)
    # 15 s of steps (300 x 0.05 s), so run 1 always outlasts the signal at 5 s. On a fast machine it lands a few
    # steps in; on a busy one it may come before the first step, and the runtime keeps it pending until Preemption
    # exists: either way one stop at a step boundary, saved and resumed. (Deriving it from the uninterrupted run's
    # duration made it land after run 1 had ended when that run happened to be slow.)
    after = "5"
    slow = FAST.replace("]", ', --step-time, "0.05"]')
    err = run_to_completion(cwd, "--set", slow, "--preempt-after", after)
    assert f"SIGCONT, SIGUSR1 to the batch shell at {after} s of run 1 (preemption rehearsal)" in err
    assert re.search(r"requeue requested \(scontrol requeue Incomplete \d+, from pid \d+ at \d\d:\d\d:\d\d\)", err)
    assert "run 2 started with SLURM_RESTART_COUNT=1" in err
    assert "COMPLETED, exit code 0, 2 runs in" in err
    assert "DUE TO JOB REQUEUE" in job_dir(cwd).with_suffix(".log").read_text()
    log = ranks_text(cwd)
    stopped = re.search(r"rank 0/4: stopping after step (\d+), weights " + WEIGHTS, log)
    resumed = re.search(r"rank 0/4: resumed weights " + WEIGHTS + r" at step (\d+)", log)
    assert stopped and resumed, log
    assert (resumed[2], resumed[1]) == (stopped[1], stopped[2])  # the step and weights that were saved
    run2 = [m for m in RANK_LINE.finditer(log) if m["run"] == "2"]
    assert sorted((m["rank"], m["step"]) for m in run2) == [(str(r), stopped[1]) for r in range(4)]
    assert "last stop: preemption" in log
    runs = run_history.runs(run_history.read(str(job_dir(cwd))))
    assert [(r.cause, r.requeued_by) for r in runs] == [("preemption", "rank0"), (None, None)]
    # step_seconds stays unknown when the signal comes before the second step (a busy machine's slow start)
    assert runs[0].saves >= 1 and runs[0].save_seconds is not None
    assert final_weights(log) == final_weights(ranks_text(first))  # as if never interrupted


@pytest.mark.slow
@pytest.mark.torch
def test_a_cancelled_local_job_resumes_from_its_state_to_the_same_weights(
    tmp_path: Path, uninterrupted: tuple[int, str, Path, float]
) -> None:
    """`slurmgen cancel local-N` mid-way (SIGTERM: the ranks save and exit), then `slurmgen resume cpu-debug` (its
    last job): the job runs again under its own id from the state it left, and ends as if never interrupted."""
    code, _, first, _ = uninterrupted
    assert code == 0, logs_of(first)
    cwd = workdir(tmp_path)
    slow = FAST.replace("]", ', --step-time, "0.05"]')  # 15 s of steps: the cancel lands mid-way
    proc = slurmgen_run(cwd, "jobs/cpu-debug.yaml", "--set", slow, stderr=cwd / "runner.err")
    try:
        deadline = time.monotonic() + 300
        # After the first periodic save (step 100 of 300): mid-way, whatever the machine's load.
        while not any("saved state" in p.read_text() for p in (cwd / "logs").glob("cpu-debug-*/rank-0.log")):
            assert proc.poll() is None and time.monotonic() < deadline, logs_of(cwd)
            time.sleep(0.1)
        n = job_dir(cwd).name.removeprefix("cpu-debug-")  # 1, unless job 1's rendezvous port was taken
        cancel = run_slurmgen("cancel", f"local-{n}", cwd=cwd, env=clean_env(), timeout=60)
        assert cancel.returncode == 0, cancel.stderr
        assert proc.wait(timeout=120) == 143, logs_of(cwd)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    assert (cwd / "logs" / "state" / f"{n}.state").is_file()  # kept: the job did not complete
    resumed_run = run_slurmgen("resume", "cpu-debug", cwd=cwd, env=clean_env(), timeout=600)
    assert resumed_run.returncode == 0, logs_of(cwd) + resumed_run.stderr
    assert f"resuming local-{n} (CANCELLED) from its saved state: run 2" in resumed_run.stderr
    assert "COMPLETED, exit code 0, 2 runs in" in resumed_run.stderr
    log = ranks_text(cwd)
    stopped = re.search(r"rank 0/4: stopping after step (\d+), weights " + WEIGHTS, log)
    resumed = re.search(r"rank 0/4: resumed weights " + WEIGHTS + r" at step (\d+)", log)
    assert stopped and resumed, log
    assert (resumed[2], resumed[1]) == (stopped[1], stopped[2]) and 0 < int(stopped[1]) < 300
    runs = run_history.runs(run_history.read(str(job_dir(cwd))))
    assert [(r.cause, r.requeued_by) for r in runs] == [("terminated", "resume"), (None, None)], runs
    assert final_weights(log) == final_weights(ranks_text(first))  # as if never interrupted
    assert not (cwd / "logs" / "state" / f"{n}.state").exists()  # completed: nothing left to resume


@pytest.mark.slow
@pytest.mark.torch
def test_torchrun_spec_preempted_locally_resumes_to_the_same_weights(
    tmp_path: Path, uninterrupted: tuple[int, str, Path, float]
) -> None:
    """The same example as one torchrun per emulated node with 2 workers each: the signal reaches the workers
    through the real torchrun agent, the run checkpoints, requeues once and ends where the srun run ends."""
    code, _, first, _ = uninterrupted
    assert code == 0, logs_of(first)
    cwd = workdir(tmp_path)
    # At 1 s the agents are still in their rendezvous and no worker exists (importing torch alone takes longer):
    # the signal must still reach the workers. Before the agent kept it for them (slurmgen.task.torchrun_agent), a
    # signal that came this early, or at 8 s on a loaded machine, was lost and the job ran to its end in one run.
    after = "1"
    slow = FAST.replace("]", ', --step-time, "0.05"]')
    torchrun = ("--set", "launcher=torchrun", "--set", "nproc_per_node=2", "--set", "tasks_per_node=1")
    err = run_to_completion(cwd, *torchrun, "--set", slow, "--preempt-after", after)
    assert "2 nodes x 2 workers on 127.0.0.[1-2] (gloo)" in err
    assert "run 2 started with SLURM_RESTART_COUNT=1" in err and "COMPLETED, exit code 0, 2 runs in" in err
    batch = job_dir(cwd).with_suffix(".log").read_text()
    assert batch.count("rendezvous at 127.0.0.1:") == 2  # one torchrun per node met on the first node, twice
    both = ranks_text(cwd)
    for run in ("1", "2"):  # per run, two workers per node (local ranks 0 and 1); torchrun decides which two
        found = sorted((int(m["rank"]), int(m["local"])) for m in RANK_LINE.finditer(both) if m["run"] == run)
        assert [rank for rank, _ in found] == [0, 1, 2, 3] and sorted(local for _, local in found) == [0, 0, 1, 1]
    stopped = re.search(r"rank 0/4: stopping after step (\d+), weights " + WEIGHTS, both)
    resumed = re.search(r"rank 0/4: resumed weights " + WEIGHTS + r" at step (\d+)", both)
    assert stopped and resumed, both
    assert (resumed[2], resumed[1]) == (stopped[1], stopped[2])
    runs = run_history.runs(run_history.read(str(job_dir(cwd))))
    assert [(r.cause, r.requeued_by) for r in runs] == [("preemption", "rank0"), (None, None)], runs
    assert final_weights(both) == final_weights(ranks_text(first))
    # The requeue's SIGTERM ends each node's torchrun agent with one line, not tracebacks (torchrun_agent.py).
    nodes = "".join(p.read_text() for p in job_dir(cwd).glob("127.0.0.*.log"))
    assert "Traceback" not in nodes and "SignalException" not in nodes, nodes
    assert 1 <= nodes.count("slurmgen: torchrun agent on 127.0.0.") <= 2, nodes


@pytest.mark.slow
@pytest.mark.torch
def test_a_preemption_signal_at_the_very_start_is_held_not_fatal(tmp_path: Path) -> None:
    """The signal reaches the batch shell before the step exists; delivered at once, it would reach tasks that
    have not blocked it yet and kill them (exit 138). The batch shell holds it for the step's first seconds."""
    cwd = workdir(tmp_path)
    err = run_to_completion(cwd, "--set", FAST, "--preempt-after", "0.2")
    assert "run 2 started with SLURM_RESTART_COUNT=1" in err
    assert "COMPLETED, exit code 0, 2 runs in" in err


STUBBORN = """\
name: stubborn
command:
  - python3
  - -c
  - "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"
time: "00:10:00"
nodes: 2
tasks_per_node: 2
preemption: false
"""


@pytest.mark.slow
def test_ctrl_c_leaves_no_process(tmp_path: Path) -> None:
    """Tasks that ignore SIGTERM: Ctrl-C ends them with SIGKILL after the wait; nothing of the job is left."""
    (tmp_path / "stubborn.yaml").write_text(STUBBORN)
    proc = slurmgen_run(tmp_path, "stubborn.yaml", stderr=tmp_path / "runner.err")
    try:
        deadline = time.monotonic() + 120

        def logs() -> list[Path]:  # the job's id: the next free one, read from the runner's own first line
            found = re.search(r"^slurmgen: local-(\d+):", (tmp_path / "runner.err").read_text(), re.M)
            return [tmp_path / "logs" / f"stubborn-{found[1] if found else 0}" / f"rank-{n}.log" for n in range(4)]

        while not all(p.exists() and p.read_text().splitlines().count("up") == 1 for p in logs()):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "runner.err").read_text()
            time.sleep(0.1)
        found = re.search(r"process group (\d+)", (tmp_path / "runner.err").read_text())
        assert found
        pgid = int(found[1])
        members = procs.group_members(pgid)
        assert len(members) >= 10  # the batch shell, srun and four tasks, each a supervisor and its program
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    elapsed = time.monotonic() - started
    err = (tmp_path / "runner.err").read_text()
    assert "interrupted: ending the job" in err and "SIGKILL to the processes still running after 5 s" in err
    assert "CANCELLED, exit code 130" in err
    assert 4 < elapsed < 30
    everything = procs.processes()
    assert [p for p in everything if p[3] == pgid] == []  # not even a zombie
    assert [p for p in everything if p[0] in members] == []


FAST_CLOCK = """
import sys, time
from pathlib import Path
from slurmgen.local import command, setup
clock = lambda: time.monotonic() * 60  # one real second is a minute of the job's
err = lambda line: print(line, file=sys.stderr)
sys.exit(command.run_local(Path("stubborn.yaml"), setup.Options(), err, clock=clock))
"""


@pytest.mark.slow
def test_signal_before_the_limit_then_the_limit_itself(tmp_path: Path) -> None:
    """On a clock 60 times faster: --signal=B:USR1@120 at 480 s of the 10 min limit reaches the batch shell,
    then the limit ends the job (tasks ignore SIGTERM: SIGKILL after KillWait) as TIMEOUT."""
    (tmp_path / "stubborn.yaml").write_text(STUBBORN.replace("preemption: false", "preemption: {lead_time: 120}"))
    result = subprocess.run(
        [sys.executable, "-c", FAST_CLOCK], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120
    )
    err = result.stderr
    assert result.returncode == 124, err
    assert "SIGCONT, SIGUSR1 to the batch shell at 480 s of run 1 (--signal=B:USR1@120)" in err
    assert "time limit 00:10:00 reached: SIGTERM to every process, SIGKILL after 10 s" in err
    assert "SIGKILL to the processes still running" in err and "TIMEOUT, exit code 124" in err
    job = re.search(r"^slurmgen: local-(\d+):", err, re.M)
    assert job, err
    batch = (tmp_path / "logs" / f"stubborn-{job[1]}.log").read_text()
    assert batch.index("batch shell received SIGUSR1") < batch.index("DUE TO TIME LIMIT")
    # Times a person reads are local date and time, as history prints them, not epoch seconds.
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    assert re.search(rf"run 1, started at {stamp}, nodes ", batch), batch
    assert re.search(rf"batch shell received SIGUSR1 at {stamp}\n", batch), batch


ESCAPER = """\
name: escaper
command: [bash, -c, "setsid sleep 300 & echo $! > escaped.pid; echo up"]
time: "00:10:00"
preemption: false
"""


@pytest.mark.slow
def test_a_process_that_left_the_job_group_is_ended_too(tmp_path: Path) -> None:
    """A task starts a process in a session of its own (setsid) and exits: the job's group is empty, but the
    orphan was re-parented to the runner (its subreaper), which ends it before returning, as Slurm's cgroup would."""
    (tmp_path / "escaper.yaml").write_text(ESCAPER)
    err = run_to_completion(tmp_path, spec="escaper.yaml")
    escaped = int((tmp_path / "escaped.pid").read_text())
    assert f"ending processes {escaped}: they left the job's process group" in err, err
    assert "COMPLETED, exit code 0" in err
    assert escaped not in [p[0] for p in procs.processes()]


REQUEUER = """\
name: requeuer
command: [bash, -c, "echo run $SLURM_RESTART_COUNT; scontrol requeue $SLURM_JOB_ID; exec sleep 60"]
time: "00:10:00"
preemption: {max_requeues: 1}
"""


@pytest.mark.slow
def test_a_job_that_keeps_asking_for_requeues_is_stopped_locally(tmp_path: Path) -> None:
    """A task that calls scontrol requeue itself, every run, past its budget (the budgets are slurmgen's, and a
    program calling scontrol bypasses them: a cluster would requeue it forever): the local runner stops it after
    RUNAWAY_REQUEUES, FAILED, and says why."""
    (tmp_path / "requeuer.yaml").write_text(REQUEUER)
    err = run_to_completion(tmp_path, spec="requeuer.yaml", code=1)
    assert f"requeue refused: {setup.RUNAWAY_REQUEUES} requeues already, the local runner's limit" in err
    assert "FAILED, exit code 1" in err
    counts = re.findall(r"^run ?(\d*)$", logs_of(tmp_path), re.M)  # SLURM_RESTART_COUNT, unset on the first run
    assert counts == ["", *map(str, range(1, setup.RUNAWAY_REQUEUES + 1))]
    # its id: the next free one, not always 1 (an id whose rendezvous port another test holds is skipped)
    job = re.search(r"^slurmgen: local-(\d+):", err, re.M)
    assert job, err
    runs = run_history.runs(run_history.read(str(tmp_path / "logs" / f"requeuer-{job[1]}")))
    assert len(runs) == setup.RUNAWAY_REQUEUES + 1 and runs[0].requeued_by == "slurm"  # not slurmgen's doing
