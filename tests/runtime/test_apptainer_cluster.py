"""Jobs inside an Apptainer image on the real Slurm 26.05 cluster (its chroot has Apptainer 1.4.5 from sid,
tests/cluster/chroot.sh): rendered scripts, real sbatch, srun, `apptainer exec`, signals and requeues.

The image (tests/cluster/image.sh) is a Debian bookworm sandbox with Debian's python3 and CPU torch from the package
index, built once per machine and cached by the digest of its recipe; nothing of the host's Python is used inside.
Every job runs its program with the image's /usr/bin/python3; slurmgen's runtime is bound in by the script itself.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from conftest import SlurmCluster

from slurmgen import run_history
from slurmgen.script.render import render
from slurmgen.spec.load import load_text

from .cluster_jobs import OWN, PY, ROOT, TRAIN, check_resume, job_history, logs, scancel, wait_for_text
from .cluster_jobs import read_log as read

pytestmark = [pytest.mark.slurm, pytest.mark.torch, pytest.mark.slurm_versions("26.05")]

IMAGE_PY = "/usr/bin/python3"  # the image's own interpreter (Debian's python3)
STEPS = 100


def build_image() -> str:
    """The test image's path, built on first use (a few minutes once per machine, then cached)."""
    done = subprocess.run([str(ROOT / "tests" / "cluster" / "image.sh")], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


@pytest.fixture(scope="module")
def image() -> str:
    return build_image()


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster, image: str) -> SlurmCluster:
    """The 26.05 cluster, checked to run apptainer on its nodes (a cluster started by an older tree has none)."""
    probe = slurm_cluster.run(["srun", "-N1", "-n1", "apptainer", "exec", image, IMAGE_PY, "-c", "print('up')"],
                              cwd="/tmp", timeout=120)  # fmt: skip
    assert probe.stdout.strip() == "up", f"apptainer does not run on the nodes: {probe.stderr[-2000:]}"
    return slurm_cluster


def container(image: str, tmp: Path, extra: str = "", runtime: str = "apptainer") -> str:
    return (
        f"container: {{runtime: {runtime}, image: {image}, python: {IMAGE_PY}, "
        f"mounts: ['{ROOT}:{ROOT}:ro', '{tmp}:{tmp}']{extra}}}\n"
    )


def submit_text(cluster: SlurmCluster, tmp: Path, name: str, text: str) -> str:
    script = tmp / f"{name}.sbatch"
    script.write_text(render(load_text(text, f"{name}.yaml").spec))
    (tmp / "logs").mkdir(exist_ok=True)
    return str(cluster.submit(script))


def spec(
    image: str, tmp: Path, name: str, command: list[str], extra: str = "", box: str = "", runtime: str = "apptainer"
) -> str:
    """2 nodes x 2 ranks, gloo, in the image; `box`: more container fields, `extra`: more spec lines."""
    return (
        f"name: {name}\ncommand: {command!r}\ntime: '00:10:00'\nnodes: 2\ntasks_per_node: 2\ncpus_per_task: 1\n"
        f"python: {PY}\noutput: {tmp}/logs\ndistributed: {{backend: gloo, timeout: 60, barrier_timeout: 30}}\n"
        + container(image, tmp, box, runtime)
        + extra
    )


def train_spec(image: str, tmp: Path, name: str, steps: int, box: str = "") -> str:
    command = [IMAGE_PY, str(TRAIN), "--steps", str(steps), "--step-time", "0.02", "--save-every", "100", "--light"]
    return spec(image, tmp, name, command, box=box)


def own_spec(image: str, tmp: Path, name: str, recovery: str, extra: list[str]) -> str:
    command = [IMAGE_PY, str(OWN), "--steps", str(STEPS), "--step-time", "0.05", "--save-every", "20",
               "--snapshot", str(tmp / f"{name}.pt"), *extra]  # fmt: skip
    return spec(image, tmp, name, command, extra=f"recovery: {recovery}\n")


def test_a_2x2_gloo_job_runs_inside_the_image_with_its_ranks_even_under_containall(
    cluster: SlurmCluster, image: str, tmp_path: Path
) -> None:
    """Under --containall the host's environment stays out; the ranks still find each other (SLURM_* handed in),
    the program is the image's Python (Debian 12's, not the forky chroot's), and the job completes."""
    probe = (
        "import os, sys; print('INSIDE', open('/etc/debian_version').read().strip(), sys.executable, "
        "os.environ['RANK'], os.environ['SLURM_PROCID'], os.environ['MASTER_ADDR'], flush=True)"
    )
    text = spec(image, tmp_path, "box", [IMAGE_PY, "-c", probe], box=", containall: true")
    job = submit_text(cluster, tmp_path, "box", text)
    info = cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
    out = logs(tmp_path, "box", job)
    assert (info.state.name, info.exit_code) == ("COMPLETED", 0), out[-3000:]
    inside = re.findall(r"INSIDE (12\.\S+) (\S+) (\d) (\d) (\S+)", out)
    assert sorted((r, p) for _, _, r, p, _ in inside) == [(str(i), str(i)) for i in range(4)], out[-3000:]
    assert {exe for _, exe, _, _, _ in inside} == {IMAGE_PY}
    # Then the training program: 2 nodes x 2 ranks, gloo, DDP, inside the image under containall.
    job = submit_text(cluster, tmp_path, "gloo", train_spec(image, tmp_path, "gloo", 60, box=", containall: true"))
    info = cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
    out = logs(tmp_path, "gloo", job)
    assert (info.state.name, info.exit_code) == ("COMPLETED", 0), out[-3000:]
    assert out.count("done after 60 steps, all_reduce=") == 4, out[-3000:]


@pytest.mark.parametrize("gpu", ["rocm", "none"])
def test_runtime_singularity_is_apptainer_by_its_former_name_and_takes_the_gpu_option(
    gpu: str, cluster: SlurmCluster, image: str, tmp_path: Path
) -> None:
    """The chroot's Apptainer also installs `singularity`: the same job runs through it, with `--rocm` (Apptainer
    warns on a node without AMD GPUs and runs on) or with no GPU option, ranks and all."""
    probe = (
        "import os; print('INSIDE', open('/etc/debian_version').read().strip(), os.environ['RANK'], "
        "os.environ.get('APPTAINER_CONTAINER') or os.environ.get('SINGULARITY_CONTAINER'), flush=True)"
    )
    text = spec(image, tmp_path, "sing", [IMAGE_PY, "-c", probe], box=f", gpu: {gpu}", runtime="singularity")
    script_words = render(load_text(text, "sing.yaml").spec)
    assert "'singularity' 'exec'" in script_words and ("'--rocm'" in script_words) is (gpu == "rocm")
    job = submit_text(cluster, tmp_path, "sing", text)
    info = cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
    out = logs(tmp_path, "sing", job)
    assert (info.state.name, info.exit_code) == ("COMPLETED", 0), out[-3000:]
    inside = re.findall(r"INSIDE (12\.\S+) (\d) (\S+)", out)
    assert sorted(rank for _, rank, _ in inside) == ["0", "1", "2", "3"], out[-3000:]
    assert {box for _, _, box in inside} == {image}, out[-3000:]


def test_usr1_preemption_saves_once_requeues_once_and_resumes_to_the_uninterrupted_weights(
    cluster: SlurmCluster, image: str, tmp_path: Path
) -> None:
    """USR1 sent to every process of the step (`scancel --signal=USR1`), twice: through Apptainer's forwarding
    and the direct delivery each rank gets it several times within a millisecond or so (measured 1-3). Still one
    save, one requeue, and the requeued run resumes to the final weights of an uninterrupted run."""
    steps = 800
    plain = submit_text(cluster, tmp_path, "plain", train_spec(image, tmp_path, "plain", steps))
    name = "pre"
    job = submit_text(cluster, tmp_path, name, train_spec(image, tmp_path, name, steps, box=", containall: true"))
    wait_for_text(tmp_path, name, job, r"start at step 0", count=4, timeout=300)
    scancel(cluster, "--signal=USR1", job)
    scancel(cluster, "--signal=USR1", job)
    info = cluster.wait_for(job, lambda i: i.restarts >= 1 and i.state.name == "RUNNING", timeout=180)
    assert info.restarts == 1
    cluster.wait_for(job, "COMPLETED", timeout=300)
    text = logs(tmp_path, name, job)
    # One save for the stop (the others say "periodic"). Inside an image a task cannot ask Slurm whether a signal
    # was a preemption and takes it for one; the batch shell, which can, requeues it as the request it was.
    stops = re.findall(r"saved state to \S+ \([\d.]+ MiB in [\d.]+ s, (\w+)\)", text)
    assert [c for c in stops if c != "periodic"] == ["preemption"], text[-3000:]
    assert text.count(f"requeue issued for job {job}") == 1, text[-3000:]
    assert re.search(r"start at step [1-9]\d* on \S+, run 2, last stop: requested", text), text[-3000:]
    check_resume(text)
    runs = job_history(tmp_path, name, job)
    assert [(r.run, r.cause) for r in runs] == [(1, "requested"), (2, None)]
    cluster.wait_for(plain, "COMPLETED", timeout=300)
    expected = re.findall(r"final weights (\S+)", logs(tmp_path, "plain", plain))
    got = re.findall(r"final weights (\S+)", text)
    assert len(expected) == 1 and got == expected, (expected, got)


def test_a_killed_rank_restarts_in_place_and_a_hang_gives_the_stacks(
    cluster: SlurmCluster, image: str, tmp_path: Path
) -> None:
    """Rank 1 SIGKILLs itself after step 50: the step starts again inside the allocation (with the node checks of a
    health check before each start), resumes from step 40 and ends with the weights of an uninterrupted run. A
    rank that hangs at step 50 gets its stacks written by py-spy (the host's, bound in) and the step restarts."""
    plain = submit_text(cluster, tmp_path, "plain", own_spec(image, tmp_path, "plain", "false", []))
    crashed = submit_text(cluster, tmp_path, "crash", own_spec(
        image, tmp_path, "crash", "{max_restarts: 2, health_check: [\"true\"]}",
        ["--die-rank", "1", "--die-at", "50", "--die-once", str(tmp_path / "died")]))  # fmt: skip
    hung = submit_text(cluster, tmp_path, "hang", own_spec(
        image, tmp_path, "hang", "{hang_timeout: 30}",
        ["--hang-rank", "1", "--hang-at", "50", "--hang-once", str(tmp_path / "hung")]))  # fmt: skip
    info = cluster.wait_for(crashed, lambda i: i.state.is_terminal, timeout=420)
    batch = read(tmp_path, "crash", crashed, "batch")
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 0, 0), batch[-3000:]
    assert re.search(r"rank 1 on \S+ \(killed by SIGKILL\) failed: restarting the step inside the allocation "
                     r"\(restart 1 of 2\)", batch), batch[-3000:]  # fmt: skip
    assert batch.count("slurmgen: the step runs on") == 2, batch[-3000:]  # the node checks, before each start
    for rank in range(4):
        text = read(tmp_path, "crash", crashed, f"rank-{rank}.log")
        assert re.findall(r"RESUMED (\d+) ", text) == ["40"], (rank, text[-2000:])
    reference = cluster.wait_for(plain, lambda i: i.state.is_terminal, timeout=420)
    assert reference.state.name == "COMPLETED"
    expected = re.findall(rf"DONE {STEPS} (\S+) rank=0", read(tmp_path, "plain", plain, "rank-0.log"))
    got = re.findall(rf"DONE {STEPS} (\S+) rank=0", read(tmp_path, "crash", crashed, "rank-0.log"))
    assert len(expected) == 1 and got == expected
    events = run_history.read(str(tmp_path / "logs" / f"crash-{crashed}"))
    [restart] = [e for e in events if e.get("event") == run_history.RESTART]
    assert (restart["cause"], restart["rank"], restart["run"]) == ("crash", 1, 1)
    info = cluster.wait_for(hung, lambda i: i.state.is_terminal, timeout=420)
    batch = read(tmp_path, "hang", hung, "batch")
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 0, 0), batch[-3000:]
    stacks = (tmp_path / "logs" / f"hang-{hung}" / "hang" / "rank-1.stacks").read_text()
    assert "stuck_in_data_loader" in stacks, stacks
    assert "restarting the step inside the allocation (restart 1 of 3)" in batch, batch[-3000:]
    got = re.findall(rf"DONE {STEPS} (\S+) rank=0", read(tmp_path, "hang", hung, "rank-0.log"))
    assert got == expected


def test_doctor_runs_the_images_python_on_a_node(cluster: SlurmCluster, image: str, tmp_path: Path) -> None:
    """`slurmgen doctor SPEC` runs the image's python3 on one node: it finds torch in the test image, and says what
    is wrong, with exit 1, for an image that is not there."""
    good = tmp_path / "good.yaml"
    good.write_text(spec(image, tmp_path, "good", [IMAGE_PY, "-c", "pass"]))
    missing = tmp_path / "missing.yaml"
    missing.write_text(spec(image + "-gone", tmp_path, "missing", [IMAGE_PY, "-c", "pass"]))
    run = [PY, "-m", "slurmgen", "doctor"]
    done = subprocess.run([*run, str(good)], env=cluster.env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"image +ok: {re.escape(image)}: python 3\.11\.\d+, torch 2\.\S+", done.stdout), done.stdout
    done = subprocess.run([*run, str(missing)], env=cluster.env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"image        FAILED: {image}-gone: could not run {IMAGE_PY} in it" in done.stdout, done.stdout
    assert "fix: check that" in done.stdout, done.stdout


def test_a_forwarded_secret_reaches_the_program_inside_a_containall_image_and_is_written_nowhere(
    cluster: SlurmCluster, image: str, tmp_path: Path
) -> None:
    """A secret, `env: {HF_TOKEN: {from_env: HF_TOKEN}}`, submitted by `slurmgen submit` with the value only in its
    environment: sbatch --export carries it to the job, the per-task shell hands it into --containall by name, and
    the image's Python sees it (it writes the value's sha256, never the value). No file under the submit dir has it."""
    secret = "hf_" + "Jk4" * 12
    seen = tmp_path / "seen.sha256"
    program = (
        "import hashlib, os, pathlib; "
        f"pathlib.Path({str(seen)!r}).write_text(hashlib.sha256(os.environ['HF_TOKEN'].encode()).hexdigest())"
    )
    text = spec(image, tmp_path, "sec", [IMAGE_PY, "-c", program], box=", containall: true")
    text = text.replace("nodes: 2\ntasks_per_node: 2", "nodes: 1\ntasks_per_node: 1")
    (tmp_path / "sec.yaml").write_text(text + "env:\n  HF_TOKEN: {from_env: HF_TOKEN}\n")
    done = run_slurmgen("submit", "sec.yaml", "--wait", cwd=tmp_path, env={**cluster.env, "HF_TOKEN": secret},
                        timeout=300)  # fmt: skip
    job = done.stdout.split()[0] if done.stdout else ""
    assert done.returncode == 0, done.stdout + done.stderr + logs(tmp_path, "sec", job)[-3000:]
    assert seen.read_text() == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in done.stdout + done.stderr
    assert [p for p in tmp_path.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()] == []
