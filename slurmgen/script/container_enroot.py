"""Plain enroot, for sites with enroot but without pyxis: `enroot create` once per node before the step, `enroot
start` in every task, `enroot remove` after the last start. Only the options enroot documents (enroot's
doc/cmd/create.md, start.md, remove.md): `create --name`, `start --rw --env KEY[=VAL] --mount FSTAB` (an fstab
entry with colon-separated fields), `remove --force`.

The container's name carries the job id and the run (SLURM_RESTART_COUNT), so a requeued run never meets the
container of a run that died before its `enroot remove`. The supervisor runs inside, as under pyxis and apptainer
(script/container_apptainer.py says why).
"""

from __future__ import annotations

from slurmgen.script.container_apptainer import CONTAINER_RUNTIME_DIR, pythonpath
from slurmgen.script.directives import sq
from slurmgen.script.expansion import batch_word
from slurmgen.script.shell_words import Shell, join
from slurmgen.spec.model import JobSpec


def container_name(spec: JobSpec) -> str:
    c = spec.container
    assert c is not None
    return sq((c.name or f"slurmgen-{spec.name}") + "-") + '"${SLURM_JOB_ID}-${SLURM_RESTART_COUNT:-0}"'


def _mount(entry: str) -> str:
    """A spec mount (/host:/container[:ro]) as enroot's fstab entry: source, target, type, options."""
    src, dst, *flags = entry.split(":")
    return f"{src}:{dst}:none:bind,ro" if flags == ["ro"] else f"{src}:{dst}"


def enroot_start_words(spec: JobSpec) -> list[str]:
    c = spec.container
    assert c is not None
    words: list[str] = ["enroot", "start"]
    if c.writable:
        words.append("--rw")
    words += ["--mount", Shell(f'"${{_sg_pkg}}:{CONTAINER_RUNTIME_DIR}/slurmgen:none:bind,ro"')]
    words += ["--mount", Shell('"${SLURMGEN_LOG_DIR}:${SLURMGEN_LOG_DIR}"')]
    if spec.preemption.enabled:  # the batch shell creates the state directory only then
        words += ["--mount", Shell('"${SLURMGEN_STATE_DIR}:${SLURMGEN_STATE_DIR}"')]
    for m in c.mounts:
        words += ["--mount", batch_word(_mount(m))]
    words += ["--env", f"PYTHONPATH={pythonpath(spec)}"]
    for name in c.env:
        words += ["--env", name]
    words.append(container_name_word(spec))
    return words


def enroot_prepare_line(spec: JobSpec) -> str:
    """Run by the batch shell before the step: one `enroot create` on every node of the allocation."""
    c = spec.container
    assert c is not None
    per_node = [*_per_node(), "--kill-on-bad-exit=1"]
    return join([*per_node, "enroot", "create", "--name", container_name_word(spec), batch_word(c.image)])


def enroot_cleanup_line(spec: JobSpec) -> str:
    return join([*_per_node(), "enroot", "remove", "--force", container_name_word(spec)])


def _per_node() -> list[str]:
    """One task on every node of the allocation (srun would otherwise take SLURM_NTASKS, the step's count)."""
    every = '"${SLURM_JOB_NUM_NODES}"'
    return ["srun", Shell(f"--nodes={every}"), Shell(f"--ntasks={every}"), "--ntasks-per-node=1"]


def container_name_word(spec: JobSpec) -> str:
    return Shell(container_name(spec))
