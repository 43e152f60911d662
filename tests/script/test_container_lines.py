"""The container command lines: apptainer exec, plain enroot create/start/remove and pyxis' srun options, checked
against the options each tool documents, and the per-task shell that hands Slurm's variables into a clean
Apptainer environment, run for real with bash. The whole scripts are golden files (jobs/container*.yaml,
tests/script/golden/); the jobs themselves run in tests/runtime/test_apptainer_cluster.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmgen.doctor.image import probe_argv, verdict
from slurmgen.script.container_apptainer import env_shell
from slurmgen.script.container_enroot import enroot_cleanup_line, enroot_prepare_line
from slurmgen.script.render import render
from slurmgen.script.step import step_groups
from slurmgen.spec.load import load_text
from slurmgen.spec.model import JobSpec

BASE = 'name: c\ncommand: [python3, /w/t.py]\ntime: "10"\nnodes: 2\n'

# The options each tool documents, as of the versions the renderer targets:
# apptainer(1) 1.4 `exec` (apptainer exec --help); enroot's doc/cmd/{create,start,remove}.md; pyxis' README
# ("--container-image", "--container-mounts", "--container-workdir", "--container-name", "--container-env",
# "--[no-]container-mount-home", "--container-writable", "--container-readonly").
APPTAINER_EXEC = {"--nv", "--rocm", "--containall", "--cleanenv", "--writable-tmpfs", "--pwd", "--bind", "--env"}
ENROOT_START = {"--conf", "--env", "--rc", "--root", "--rw", "--mount"}
ENROOT_CREATE = {"--name"}
ENROOT_REMOVE = {"--force"}
PYXIS = {"--container-image", "--container-mounts", "--container-workdir", "--container-name",
         "--container-env", "--container-mount-home", "--no-container-mount-home", "--container-writable",
         "--container-readonly"}  # fmt: skip


def spec(container: str, extra: str = "") -> JobSpec:
    return load_text(BASE + extra + "container:\n" + container, "c.yaml").spec


def options(words: list[str]) -> set[str]:
    return {w.split("=", 1)[0] for w in words if w.startswith("--")}


def test_apptainer_exec_uses_only_documented_options_and_adds_nv_for_gpus() -> None:
    box = "  runtime: apptainer\n  image: /i/t.sif\n  workdir: /w\n  writable_tmpfs: true\n  mounts: [/d:/d:ro]\n"
    cpu = step_groups(spec(box))
    gpu = step_groups(spec(box + "  cleanenv: true\n", "gpus_per_node: 4\n"))
    for groups in (cpu, gpu):
        exec_words = groups[1][groups[1].index("exec") + 1 : groups[1].index("/i/t.sif")]
        assert options(exec_words) <= APPTAINER_EXEC, options(exec_words)
        assert "--writable-tmpfs" in exec_words and "--pwd=/w" in exec_words and "--bind=/d:/d:ro" in exec_words
        assert any("_sg_pkg" in w and "/opt/slurmgen/slurmgen:ro" in w for w in exec_words)
        assert any("SLURMGEN_STATE_DIR" in w for w in exec_words) and any("SLURMGEN_LOG_DIR" in w for w in exec_words)
        assert not any(w.startswith("--container") for w in groups[0])  # no pyxis options on srun
    assert "--nv" not in cpu[1] and "--nv" in gpu[1]
    assert cpu[1][0] == "apptainer"  # a plain exec passes the host's environment: no shell in between
    assert gpu[1][:2] == ["bash", "-c"] and "--cleanenv" in gpu[1]
    # The image's interpreter runs the runtime entry point inside.
    assert step_groups(spec(box + "  python: /opt/venv/bin/python\n"))[2][0] == "/opt/venv/bin/python"


def test_enroot_lines_use_only_documented_options() -> None:
    s = spec("  runtime: enroot\n  image: /i/t.sqsh\n  writable: true\n  mounts: [/d:/d:ro, /h:/w]\n  env: [TOKEN]\n")
    start = step_groups(s)[1]
    assert start[:2] == ["enroot", "start"] and options(start) <= ENROOT_START
    assert "--rw" in start and start[start.index("/d:/d:none:bind,ro") - 1 :][:2] == ["--mount", "/d:/d:none:bind,ro"]
    assert start[start.index("TOKEN") - 1 :][:2] == ["--env", "TOKEN"]
    create, remove = enroot_prepare_line(s), enroot_cleanup_line(s)
    assert "'enroot' 'create' '--name' 'slurmgen-c-'\"${SLURM_JOB_ID}-${SLURM_RESTART_COUNT:-0}\" '/i/t.sqsh'" in create
    assert "'enroot' 'remove' '--force' 'slurmgen-c-'" in remove
    for line, documented in ((create, ENROOT_CREATE), (remove, ENROOT_REMOVE)):
        tail = line.split("'enroot'", 1)[1]
        assert {w.strip("'").split("=")[0] for w in tail.split() if w.startswith("'--")} <= documented


@pytest.mark.parametrize(
    ("runtime", "gpu", "gpus", "flags"),
    [
        ("apptainer", None, 0, []),
        ("apptainer", None, 4, ["--nv"]),  # as before container.gpu: --nv whenever the job asks for GPUs
        ("apptainer", "nvidia", 0, ["--nv"]),
        ("apptainer", "rocm", 4, ["--rocm"]),
        ("apptainer", "none", 4, []),
        ("singularity", None, 4, ["--nv"]),
        ("singularity", "rocm", 0, ["--rocm"]),
    ],
)
def test_container_gpu_picks_the_exec_option_and_singularity_is_apptainer_by_its_old_name(
    runtime: str, gpu: str | None, gpus: int, flags: list[str]
) -> None:
    box = f"  runtime: {runtime}\n  image: /i/t.sif\n" + (f"  gpu: {gpu}\n" if gpu else "")
    s = spec(box, f"gpus_per_node: {gpus}\n")
    line = step_groups(s)[1]
    assert line[0] == runtime and line[1] == "exec"
    assert [w for w in line if w in ("--nv", "--rocm")] == flags
    assert options(line[2 : line.index("/i/t.sif")]) <= APPTAINER_EXEC
    # the doctor's probe runs the image the same way
    argv = probe_argv(s)
    assert argv is not None and argv[4:6] == [runtime, "exec"] and [w for w in argv if w in ("--nv", "--rocm")] == flags


def mounts_expanded(word: str, tmp_path: Path) -> list[str]:
    """pyxis' --container-mounts word as the batch shell expands it (bash, with the variables the script sets)."""
    env = {"PATH": os.environ["PATH"], "_sg_pkg": "/pkg/slurmgen", "SLURMGEN_LOG_DIR": "/out/logs/c-7",
           "SLURMGEN_STATE_DIR": "/out/logs/state"}  # fmt: skip
    done = subprocess.run(["bash", "-c", f"printf '%s\\n' {word}"], env=env, capture_output=True, text=True, check=True)
    (value,) = done.stdout.splitlines()
    assert value.startswith("--container-mounts=")
    return value.removeprefix("--container-mounts=").split(",")


def test_pyxis_options_are_documented_ones_and_mount_the_log_dir(tmp_path: Path) -> None:
    """The log directory is mounted at its own path (the ranks' logs, rank 0's history and the ready files would
    land inside the image otherwise), and the state directory only when preemption is on: the batch shell makes
    it only then, and pyxis fails a step whose mount source is missing."""
    box = ("  image: 'nvcr.io#nvidia/pytorch:24.05-py3'\n  workdir: /w\n  name: c1\n  env: [A, B]\n"
           "  mount_home: false\n  writable: false\n  mounts: [/d:/d:ro]\n")  # fmt: skip
    s = spec(box)
    srun = step_groups(s)[0]
    pyxis = {w for w in options(srun) if "container" in w}
    assert pyxis <= PYXIS and "--container-env=A,B" in srun
    assert step_groups(s)[1][0] == "python3"  # no container line between srun and the entry point
    word = next(w for w in srun if w.startswith("--container-mounts="))
    assert mounts_expanded(word, tmp_path) == [
        "/pkg/slurmgen:/opt/slurmgen/slurmgen:ro",
        "/out/logs/c-7:/out/logs/c-7",
        "/out/logs/state:/out/logs/state",
        "/d:/d:ro",
    ]
    off = step_groups(spec(box, "preemption: false\n"))[0]
    word = next(w for w in off if w.startswith("--container-mounts="))
    assert mounts_expanded(word, tmp_path) == [
        "/pkg/slurmgen:/opt/slurmgen/slurmgen:ro",
        "/out/logs/c-7:/out/logs/c-7",
        "/d:/d:ro",
    ]
    # The rendered script creates each mounted directory before the step, the state directory with preemption only.
    on, off_script = render(s), render(spec(box, "preemption: false\n"))
    assert on.index('mkdir -p "${SLURMGEN_LOG_DIR}" "${SLURMGEN_STATE_DIR}";') < on.index("--container-mounts=")
    assert 'mkdir -p "${SLURMGEN_LOG_DIR}";' in off_script and "SLURMGEN_STATE_DIR:" not in off_script


@pytest.mark.parametrize("containall", [False, True])
def test_the_env_shell_hands_each_task_its_own_slurm_variables(containall: bool, tmp_path: Path) -> None:
    """Run the per-task shell for real, with `env` standing in for apptainer: every SLURM_*, SLURMGEN_*, MASTER_*
    and named variable gets its APPTAINERENV_ copy with this task's value; anything else does not."""
    box = "  runtime: apptainer\n  image: /i\n  env: [HF_HOME]\n" + ("  containall: true\n" if containall else "")
    words = env_shell(spec(box, "env: {MY_FLAG: '1'}\n"))
    task_env = {"PATH": os.environ["PATH"], "SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURMD_NODENAME": "node2",
                "SLURMGEN_LOG_DIR": "/l d", "MASTER_ADDR": "node1", "MASTER_PORT": "29500", "HF_HOME": "/h",
                "MY_FLAG": "1", "SECRET_OTHER": "x", "ODD": "a\nb"}  # fmt: skip
    done = subprocess.run([*words, "env", "-0"], env=task_env, capture_output=True, text=True, check=True)
    got = dict(item.split("=", 1) for item in done.stdout.split("\0") if item.startswith("APPTAINERENV_"))
    assert got == {
        "APPTAINERENV_SLURM_PROCID": "3",
        "APPTAINERENV_SLURM_LOCALID": "1",
        "APPTAINERENV_SLURMD_NODENAME": "node2",
        "APPTAINERENV_SLURMGEN_LOG_DIR": "/l d",
        "APPTAINERENV_MASTER_ADDR": "node1",
        "APPTAINERENV_MASTER_PORT": "29500",
        "APPTAINERENV_HF_HOME": "/h",
        "APPTAINERENV_MY_FLAG": "1",
    }


GPU_BOX = "  runtime: apptainer\n  image: /i/t.sif\n  python: /usr/bin/python3\n"


@pytest.mark.parametrize(
    ("rc", "out", "err", "ok", "says"),
    [
        (0, "python 3.11.2\ntorch 2.13.0+cpu\n", "", True, "/i/t.sif: python 3.11.2, torch 2.13.0+cpu"),
        (0, "python 3.11.2\nno-torch ModuleNotFoundError No module named 'torch'\n", "", False,
         "but torch does not import (ModuleNotFoundError No module named 'torch'); fix: install torch in the image"),
        (255, "", "FATAL:   could not open image /i/t.sif: failed to retrieve path for /i/t.sif: lstat /i/t.sif: "
         "no such file or directory\nsrun: error: node1: task 0: Exited with exit code 255\n", False,
         "(FATAL:   could not open image /i/t.sif: failed to retrieve path for /i/t.sif: lstat /i/t.sif: no such "
         "file or directory); fix: check that /i/t.sif exists on the nodes and has /usr/bin/python3"),
        (255, "", "FATAL:   stat /usr/bin/python3: no such file or directory\n", False,
         "could not run /usr/bin/python3"),
        (1, "", "srun: error: Unable to allocate resources: Invalid partition name specified\n", False,
         "(srun: error: Unable to allocate resources: Invalid partition name specified); fix: run the same step"),
    ],
)  # fmt: skip
def test_doctor_reads_the_image_probe(rc: int, out: str, err: str, ok: bool, says: str) -> None:
    s = spec(GPU_BOX, "gpus_per_node: 1\npartition: gpu\n")
    argv = probe_argv(s)
    assert argv is not None and argv[:5] == ["srun", "--nodes=1", "--ntasks=1", "--time=10", "--partition=gpu"]
    assert argv[5:10] == ["apptainer", "exec", "--nv", "/i/t.sif", "/usr/bin/python3"]
    found = verdict(s, rc, out, err)
    assert found.ok is ok and says in found.line, found.line


def test_doctor_probe_for_pyxis_and_none_for_enroot_or_no_container() -> None:
    argv = probe_argv(spec("  image: 'nvcr.io#nvidia/pytorch:24.05-py3'\n"))
    assert argv is not None and "--container-image=nvcr.io#nvidia/pytorch:24.05-py3" in argv
    assert probe_argv(spec("  runtime: enroot\n  image: /i/t.sqsh\n")) is None
    assert probe_argv(load_text(BASE, "c.yaml").spec) is None


SECRET = "hf_" + "Wv3" * 12  # a Hugging Face token's shape; only this test knows it


@pytest.mark.parametrize("clean", ["cleanenv", "containall"])
def test_a_forwarded_secret_enters_a_clean_apptainer_by_name_only(clean: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under cleanenv/containall a forwarded secret (`env: {X: {from_env: Y}}`) is handed in by its name
    (an APPTAINERENV_ copy the per-task shell makes from the task's own environment), never as a value on a
    command line, where `ps` shows it to every user of the node. Rendered with the value set here, then the task's
    shell run for real with `python` standing in for apptainer: the value is in its environment, not its argv."""
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("MY_KEY", SECRET[::-1])
    box = f"  runtime: apptainer\n  image: /i/t.sif\n  {clean}: true\n"
    job = spec(box, "env: {HF_TOKEN: {from_env: HF_TOKEN}, WANDB_API_KEY: {from_env: MY_KEY}}\n")
    script = render(job)
    assert SECRET not in script and SECRET[::-1] not in script
    assert "#SBATCH --export='ALL,HF_TOKEN,MY_KEY'" in script and 'export WANDB_API_KEY="${MY_KEY}"' in script
    words = step_groups(job)[1]
    exec_words = words[words.index("exec") + 1 : words.index("/i/t.sif")]
    assert [w for w in exec_words if "HF_TOKEN" in w or "WANDB_API_KEY" in w] == []  # no --env=NAME=value
    assert "|HF_TOKEN|WANDB_API_KEY)" in words[2]  # the per-task shell's list of names to hand in
    show = "import json, os, sys; print(json.dumps([sys.argv, {k: v for k, v in os.environ.items()}]))"
    task_env = {"PATH": os.environ["PATH"], "HF_TOKEN": SECRET, "WANDB_API_KEY": SECRET[::-1]}
    done = subprocess.run([*env_shell(job), sys.executable, "-c", show, *exec_words], env=task_env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    argv, environ = json.loads(done.stdout)
    assert SECRET not in " ".join(argv) and SECRET[::-1] not in " ".join(argv)
    assert environ["APPTAINERENV_HF_TOKEN"] == SECRET and environ["APPTAINERENV_WANDB_API_KEY"] == SECRET[::-1]
