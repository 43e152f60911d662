"""The step's command line: srun, optionally a container (pyxis options, `enroot start` or `apptainer exec`),
optionally torchrun, then the runtime entry point.

Computed here as words so tests can read it without parsing shell; the template joins them. A `Shell` word is
emitted as written (it holds `"${VAR}"` expansions that the batch shell must perform); every other word is data
and is single-quoted. The container runtimes' modules are imported inside the functions that use them: a spec
without a container never loads them.
"""

from __future__ import annotations

from slurmgen import contract
from slurmgen.script.expansion import batch_word
from slurmgen.script.shell_words import Shell, join, quoted
from slurmgen.script.sweep import command_words, task_flags  # placeholders and ${NAME} become expansions
from slurmgen.signal_names import elastic_signals
from slurmgen.spec.extra_options import KILL_ON_BAD_EXIT
from slurmgen.spec.model import JobSpec, node_checks

ACCELERATE_MODULE = "accelerate.commands.launch"  # `accelerate launch` (accelerate/commands/accelerate_cli.py)


def container_bootstrap() -> str:
    """Inside an image slurmgen is not installed: put the mounted package on sys.path, then run the entry point."""
    from slurmgen.script.container_apptainer import CONTAINER_RUNTIME_DIR

    return (
        f'import sys; sys.path.insert(0, "{CONTAINER_RUNTIME_DIR}"); '
        f"from {contract.TASK_MAIN} import main; sys.exit(main())"
    )


def runtime_entry(spec: JobSpec, *flags: str) -> list[str]:
    if spec.container is not None:
        return [inside_python(spec), "-c", container_bootstrap(), *flags]
    return [spec.python, "-m", contract.TASK_ENTRY, *flags]


def inside_python(spec: JobSpec) -> str:
    """The interpreter of the step's tasks: the image's (container.python) when they run in one."""
    return (spec.container.python if spec.container else None) or spec.python


def rendezvous_words(spec: JobSpec) -> list[str]:
    """Run in the batch shell (outside any container): prints `MASTER_ADDR MASTER_PORT`."""
    return [spec.python, "-m", contract.TASK_ENTRY, "--rendezvous"]


def batch_words(spec: JobSpec, *args: str) -> list[str]:
    """The batch shell's own helper (slurmgen.batch), run outside any container like the rendezvous."""
    return [spec.python, "-m", contract.BATCH_ENTRY, *args]


def package_dir_words(spec: JobSpec) -> list[str]:
    return [spec.python, "-c", "import os, slurmgen; print(os.path.dirname(os.path.abspath(slurmgen.__file__)))"]


def srun_words(spec: JobSpec) -> list[str]:
    words: list[str] = [
        "srun",
        f"--nodes={spec.nodes}",
        f"--ntasks-per-node={spec.tasks_per_node}",
    ]
    if spec.cpus_per_task:
        # Since Slurm 22.05 srun no longer inherits --cpus-per-task from the allocation (webknossos-libs#1483).
        words.append(f"--cpus-per-task={spec.cpus_per_task}")
    extra = dict(spec.srun)
    # One rank failing ends the step, instead of leaving the others blocked in a collective until the timeout;
    # `srun: {kill-on-bad-exit: false}` lets them run on (a program that handles a lost task itself).
    words.append(f"--kill-on-bad-exit={extra.pop(KILL_ON_BAD_EXIT, None) or '1'}")
    if node_checks(spec):
        # The nodes that passed their checks (batch/nodes.py), without the spares or a bad node.
        words.append(Shell('${_sg_nodes:+"--nodelist=${_sg_nodes}"}'))
    if spec.recovery.spare_nodes:
        # srun takes SLURM_NTASKS (the whole allocation's, spares included) for --ntasks: say the step's own.
        words.append(f"--ntasks={spec.nodes * spec.tasks_per_node}")
    # One log per node, appended across requeued runs, in the per-job directory the batch shell created.
    words.append(Shell('--output="${SLURMGEN_LOG_DIR}/%N.log"'))
    words.append("--open-mode=append")
    # The spec's own srun options (spec field srun), each one word: the value is data, never split or expanded.
    words.extend(f"--{option}" if value is None else f"--{option}={value}" for option, value in extra.items())
    if spec.container is not None and spec.container.runtime == "pyxis":
        words.extend(container_words(spec))
    return words


def container_words(spec: JobSpec) -> list[str]:
    from slurmgen.script.container_apptainer import CONTAINER_RUNTIME_DIR

    c = spec.container
    assert c is not None
    words: list[str] = [batch_word(f"--container-image={c.image}")]
    # The runtime must be importable inside the image: mount slurmgen's package (found by the batch shell), and
    # at the same paths as outside
    # the log directory (the ranks' logs, rank 0's history and the ready files, which the batch shell reads
    # outside), and the state directory (resume state, requeue marker) when preemption is on: the batch shell
    # creates it only then, and pyxis fails a step whose mount source is missing.
    mounts = [f"${{_sg_pkg}}:{CONTAINER_RUNTIME_DIR}/slurmgen:ro", "${SLURMGEN_LOG_DIR}:${SLURMGEN_LOG_DIR}"]
    if spec.preemption.enabled:
        mounts.append("${SLURMGEN_STATE_DIR}:${SLURMGEN_STATE_DIR}")
    ours = f'--container-mounts="{",".join(mounts)}"'
    words.append(Shell(ours + (quoted(batch_word("," + ",".join(c.mounts))) if c.mounts else "")))
    if c.workdir:
        words.append(f"--container-workdir={c.workdir}")
    if c.env:
        # pyxis: these variables take the job's value over the image's (pyxis' --container-env).
        words.append("--container-env=" + ",".join(c.env))
    if c.name:
        words.append(f"--container-name={c.name}")
    if c.mount_home is False:
        words.append("--no-container-mount-home")
    if c.writable is True:
        words.append("--container-writable")
    elif c.writable is False:
        words.append("--container-readonly")
    return words


def torchrun_words(spec: JobSpec) -> list[str]:
    signals = elastic_signals(spec.preemption.signal if spec.preemption.enabled else None)
    words = [
        inside_python(spec),
        "-m",
        "torch.distributed.run",
        f"--nnodes={spec.nodes}",
        f"--nproc-per-node={spec.nproc_per_node}",
        "--rdzv-backend=c10d",
        Shell('--rdzv-endpoint="${MASTER_ADDR}:${MASTER_PORT}"'),
        Shell('--rdzv-id="${_sg_key}"'),
        "--signals-to-handle=" + ",".join(signals),
        # A crashed worker ends its agent and so the step, which the batch shell restarts inside the allocation
        # (spec field recovery, batch/restart.py): torchrun restarting its workers as well would double
        # every restart and hide it from the run history. Its default is 0 too; said here so it stays so.
        "--max-restarts=0",
    ]
    if spec.preemption.enabled:
        # torchrun SIGKILLs its workers 30 s after forwarding a signal unless told otherwise (pytorch#119856);
        # the workers need the whole lead time to agree, save and requeue.
        words.append(f"--shutdown-timeout={spec.preemption.lead_time}")
    words.extend(spec.torchrun.extra_args)  # the spec's own (spec/launcher_args.py refused slurmgen's)
    words.append("--no-python")
    return words


def accelerate_words(spec: JobSpec) -> list[str]:
    """`accelerate launch` once per node, like torchrun. The rank of the node and the rendezvous address and port
    are the task's own: slurmgen's agent adds --machine_rank, --main_process_ip and --main_process_port from its
    job context (slurmgen/task/torchrun_agent.py), as torchrun learns them from its c10d rendezvous."""
    from slurmgen.spec.launcher_args import accelerate_mode

    extra = list(spec.torchrun.extra_args)
    words = [inside_python(spec), "-m", ACCELERATE_MODULE]
    # Workers on GPUs or CPUs alike through torchrun (accelerate's multi_gpu_launcher); its --cpu would run one
    # process per node (simple_launcher). A job without GPUs gets ACCELERATE_USE_CPU from slurmgen's entry point
    # in each worker (task/prepare.py). One process in all needs neither; accelerate refuses --multi_gpu for it.
    if spec.world_size > 1 and not accelerate_mode(extra):
        words.append("--multi_gpu")
    words += [f"--num_machines={spec.nodes}", f"--num_processes={spec.world_size}"]
    # Its torchrun restarting workers would double the batch shell's restarts (torchrun_words says why).
    words.append("--max_restarts=0")
    words.extend(extra)
    words.append("--no_python")
    return words


def step_groups(spec: JobSpec) -> list[list[str]]:
    """The whole step command, in groups for one line each: srun [+ pyxis options], [apptainer exec or enroot
    start], [agent entry, torchrun],
    the runtime entry point, the user's command."""
    groups = [srun_words(spec)]
    if spec.container is not None and spec.container.runtime in ("apptainer", "singularity"):
        from slurmgen.script.container_apptainer import apptainer_words

        groups.append(apptainer_words(spec))
    elif spec.container is not None and spec.container.runtime == "enroot":
        from slurmgen.script.container_enroot import enroot_start_words

        groups.append(enroot_start_words(spec))
    if spec.per_node_launcher:
        groups.append(runtime_entry(spec, "--torchrun-agent", "--"))
        groups.append(accelerate_words(spec) if spec.launcher == "accelerate" else torchrun_words(spec))
    groups.append(runtime_entry(spec, *task_flags(spec), "--"))
    groups.append(command_words(spec))
    return groups


def step_words(spec: JobSpec) -> list[str]:
    return [word for group in step_groups(spec) for word in group]


def step_line(spec: JobSpec) -> str:
    """The step as shell text, one group per line, continued with backslashes."""
    return " \\\n    ".join(join(group) for group in step_groups(spec))


def container_context(spec: JobSpec) -> dict[str, str]:
    """The batch shell's container lines besides the step: apptainer's py-spy lookup, enroot's create/remove."""
    runtime = spec.container.runtime if spec.container else None
    if runtime not in ("apptainer", "singularity", "enroot"):
        return {"container_tools": "", "container_prepare": "", "container_cleanup": ""}
    from slurmgen.script.container_apptainer import pyspy_words
    from slurmgen.script.container_enroot import enroot_cleanup_line, enroot_prepare_line

    return {
        "container_tools": join(pyspy_words(spec)) if runtime != "enroot" else "",
        "container_prepare": enroot_prepare_line(spec) if runtime == "enroot" else "",
        "container_cleanup": enroot_cleanup_line(spec) if runtime == "enroot" else "",
    }
