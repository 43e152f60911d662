"""The words that start each task inside an Apptainer image: `apptainer exec [options] IMAGE`, between srun and
slurmgen's runtime entry point (script/step.py), and, under `cleanenv`/`containall`, the per-task shell that hands
Slurm's variables in.

Where the task supervisor runs: inside the image, like under pyxis. It is the program's direct parent there, which
its signal handling needs (it sets the program's preemption-signal disposition before exec and reads the program's
SigCgt/SigBlk in /proc: slurmgen/task/supervisor.py); outside, the program's parent would be Apptainer's starter,
whose own handlers and masks are all /proc would show. Without a PID namespace (the default: no `containall`) the
PIDs inside are the host's, so slurmstepd signals the supervisor and the program directly, and py-spy, bound in
from the host, reads the program's stacks by that PID.

What the task needs inside, and how it gets there:
- slurmgen's package, at /opt/slurmgen (the bootstrap in step.py, and PYTHONPATH for the program's own
  `import slurmgen.runtime`), read-only;
- the state and log directories at their own paths: the saves, the requeue marker that the batch shell acts on
  (there is no scontrol in the image), the ranks' logs and ready files;
- the environment: a plain `apptainer exec` passes the host's (PATH and LD_LIBRARY_PATH aside), `--cleanenv` and
  `--containall` pass nothing, except variables named APPTAINERENV_<NAME> or given with --env (apptainer(1),
  "Environment and Metadata"). Slurm sets SLURM_PROCID and the rest per task, so they cannot be written into the
  script: a shell in each task exports an APPTAINERENV_ copy of each before it execs apptainer;
- `--nv` for a GPU job: it binds the host's driver libraries and /dev/nvidia* (on a node without GPUs it is a
  silent no-op, so it is safe whenever GPUs are asked for); `--rocm` for AMD's (container.gpu: rocm), neither for
  container.gpu: none.

runtime: singularity is Apptainer installed under its former name (Apptainer ships a `singularity` command with
the same options, apptainer(1)); the lines are the same with the command's name.
"""

from __future__ import annotations

from slurmgen.script.expansion import batch_word
from slurmgen.script.shell_words import Shell
from slurmgen.spec.model import JobSpec

CONTAINER_RUNTIME_DIR = "/opt/slurmgen"  # where slurmgen's own package is mounted inside a container image
TOOLS_DIR = f"{CONTAINER_RUNTIME_DIR}/bin"  # the host's py-spy, for the hang watchdog's stacks
# Variables the runtime reads, always handed in (besides the spec's env and container.env): Slurm's per task,
# slurmgen's contract (contract.py) and the rendezvous the batch shell worked out.
PASSED_PATTERNS = ("SLURM_*", "SLURMD_*", "SLURMGEN_*", "MASTER_ADDR", "MASTER_PORT", "PYTHONUNBUFFERED")
# The batch shell finds py-spy where the watchdog would look outside: beside the interpreter, then on PATH.
PYSPY_PROBE = (
    "import os, shutil, sys; p = os.path.join(os.path.dirname(sys.executable), 'py-spy'); "
    "print(p if os.access(p, os.X_OK) else shutil.which('py-spy') or '')"
)


def env_names(spec: JobSpec) -> list[str]:
    """The patterns and names handed into a clean environment, in a stable order."""
    c = spec.container
    assert c is not None
    names = list(PASSED_PATTERNS)
    for name in [key for key, _ in spec.env] + list(c.env):
        if name not in names:
            names.append(name)
    return names


def env_shell(spec: JobSpec) -> list[str]:
    """`bash -c SCRIPT NAME`: exports APPTAINERENV_<name> for every passed variable set in this task, then execs
    the rest of the line. bash for `compgen -e` (the exported names) and `${!name}` (bash(1))."""
    cases = "|".join(env_names(spec))
    script = (
        f'for _sg_v in $(compgen -e); do case "$_sg_v" in {cases}) export "APPTAINERENV_$_sg_v=${{!_sg_v}}";; '
        'esac; done; exec "$@"'
    )
    return ["bash", "-c", script, "slurmgen-apptainer-env"]


def pythonpath(spec: JobSpec) -> str:
    user = dict(spec.env).get("PYTHONPATH")
    return CONTAINER_RUNTIME_DIR + (f":{user}" if user else "")


# apptainer(1) exec: --nv binds NVIDIA's driver and devices, --rocm AMD's.
_GPU_FLAGS = {"nvidia": "--nv", "rocm": "--rocm"}


def gpu_flags(spec: JobSpec) -> list[str]:
    """The GPU option of `apptainer exec`: container.gpu's, else --nv when the job asks for GPUs."""
    c = spec.container
    assert c is not None
    gpu = c.gpu or ("nvidia" if spec.gpus_per_node else "none")
    return [_GPU_FLAGS[gpu]] if gpu in _GPU_FLAGS else []


def command_name(spec: JobSpec) -> str:
    """`apptainer`, or `singularity` where Apptainer is installed under that name."""
    c = spec.container
    assert c is not None
    return "singularity" if c.runtime == "singularity" else "apptainer"


def apptainer_words(spec: JobSpec) -> list[str]:
    c = spec.container
    assert c is not None
    words: list[str] = []
    if c.cleanenv or c.containall:
        words += env_shell(spec)
    words += [command_name(spec), "exec", *gpu_flags(spec)]
    if c.containall:
        words.append("--containall")
    elif c.cleanenv:
        words.append("--cleanenv")
    if c.writable_tmpfs:
        words.append("--writable-tmpfs")
    if c.workdir:
        words.append(f"--pwd={c.workdir}")
    words.append(Shell(f'--bind="${{_sg_pkg}}:{CONTAINER_RUNTIME_DIR}/slurmgen:ro"'))
    words.append(Shell('--bind="${SLURMGEN_LOG_DIR}"'))
    if spec.preemption.enabled:  # the batch shell creates the state directory only then
        words.append(Shell('--bind="${SLURMGEN_STATE_DIR}"'))
    words.append(Shell(f'${{_sg_pyspy:+"--bind=${{_sg_pyspy}}:{TOOLS_DIR}/py-spy:ro"}}'))
    words += [batch_word(f"--bind={m}") for m in c.mounts]
    words.append(f"--env=PYTHONPATH={pythonpath(spec)}")
    words.append(f"--env=PREPEND_PATH={TOOLS_DIR}")
    words.append(batch_word(c.image))
    return words


def pyspy_words(spec: JobSpec) -> list[str]:
    return [spec.python, "-c", PYSPY_PROBE]
