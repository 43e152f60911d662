"""The job spec v1 field table: names, types, defaults and descriptions. The public contract.

Validation (slurmgen.spec) and `slurmgen schema` are both driven by this table, so they cannot disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from slurmgen import contract, variables
from slurmgen.signal_names import preemption_signal_problem, signal_name
from slurmgen.slurm.times import format_duration, parse_time
from slurmgen.spec.checkpoint import CHECKPOINT, RESUME
from slurmgen.spec.progress import PROGRESS
from slurmgen.spec.recovery import RECOVERY
from slurmgen.spec.sweep import SweepType
from slurmgen.spec.types import BATCH, SBATCH_LINE, TASK, AnyOf, Bool, Ctx, Enum, Field, Int, List, Map, Obj, Str, Type
from slurmgen.spec.yaml_source import REFUSED, FieldPath

NAME = r"[A-Za-z0-9_][A-Za-z0-9._-]*"
ENV_KEY = r"[A-Za-z_][A-Za-z0-9_]*"
# Values on #SBATCH lines are quoted anyway; these patterns reject what Slurm itself would not accept.
# What Slurm's str_to_mbytes (src/common/proc_args.c) takes for --mem: a whole number of MB, or one with a K, M,
# G or T suffix in either case, optionally followed by B. slurmgen writes the suffix in capitals without the B
# (`32gb` -> `32G`), the form every Slurm version reads.
MEM = r"(\d+)(?:([KMGTkmgt])[Bb]?)?"
ARRAY = r"[0-9][0-9,:%-]*"
DEPENDENCY = r"[a-z_]+(:[0-9_+*]+)*([,?][a-z_]+(:[0-9_+*]+)*)*|singleton"
SBATCH_KEY = r"[A-Za-z]|[a-z][a-z0-9-]*"  # a one-letter key is a short option: p is -p, --partition
SRUN_KEY = r"[A-Za-z]|[a-z][a-z0-9_-]*"  # srun also takes --cpu_bind
MOUNT = r"/[^,:]*:/[^,:]*(:[a-z0-9+]+)?"
# Slurm reads a time limit in time_str2secs (src/common/parse_time.c), summing days, hours, minutes and seconds in
# a C int: past 2**31 - 1 seconds (about 68 years) it wraps around, into a negative or a wrong limit.
MAX_TIME_SECONDS = 2**31 - 1
# slurm.conf(5), MaxArraySize: "The value may not exceed 4000001"; an index is below MaxArraySize.
MAX_ARRAY_INDEX = 4_000_000


class Time(Str):
    """A Slurm time string. YAML turns `1:00:00` into 3600, which Slurm would read as 3600 minutes."""

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        value = ctx.typed_text(value, path)
        mark = ctx.raw(path)
        if isinstance(value, int | float) and not isinstance(value, bool):
            raw = mark.raw if mark is not None else str(value)
            if ":" in raw:
                return ctx.fail(
                    path,
                    f"YAML reads `{raw}` as the number {value} (base 60), which Slurm would take as {value} minutes; "
                    f'quote it: time: "{raw}"',
                )
            if isinstance(value, int) and value >= 0:
                return ctx.fail(path, f'write the time as quoted text, e.g. "{raw}" for {raw} minutes or "01:00:00"')
            # .inf, .nan, 1.5: quoted, they are no Slurm time either; say the forms that are
            return ctx.fail(
                path,
                f"YAML reads `{raw}` as a number, and Slurm has no such time; write quoted text in "
                'one of its forms: "90" (minutes), "01:30:00" (HH:MM:SS) or "2-00:00:00" (D-HH:MM:SS)',
            )
        value = super().check(value, ctx, path)
        if isinstance(value, str):
            try:
                seconds = parse_time(value)
            except ValueError as exc:
                return ctx.fail(path, str(exc))
            if seconds is not None and seconds > MAX_TIME_SECONDS:
                return ctx.fail(
                    path,
                    f"{value!r} is longer than Slurm can hold (it adds the time up in seconds in a 32-bit int); "
                    f'give at most "{format_duration(MAX_TIME_SECONDS)}", or "UNLIMITED"',
                )
        return value


class ArrayIndexes(Str):
    """`--array` indexes; each one at most MAX_ARRAY_INDEX."""

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        value = super().check(value, ctx, path)
        if isinstance(value, str):
            indexes, _, _throttle = value.partition("%")
            for number in re.findall(r"[0-9]+", indexes):
                if int(number) > MAX_ARRAY_INDEX:
                    return ctx.fail(
                        path,
                        f"index {number} is above {MAX_ARRAY_INDEX}, the largest any Slurm accepts (MaxArraySize is "
                        f"at most {MAX_ARRAY_INDEX + 1}, slurm.conf(5)); use smaller indexes",
                    )
        return value


class Mem(Str):
    """Memory per node as sbatch reads it; normalised to digits plus an upper-case unit."""

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        value = super().check(value, ctx, path)
        if not isinstance(value, str):
            return value
        match = re.fullmatch(MEM, value)
        assert match is not None  # the pattern already matched in Str.check
        return match[1] + (match[2] or "").upper()


class Signal(Type):
    """A preemption signal, by name (`USR1`, `SIGUSR1`, `usr1`) or number; comes out as the bare name."""

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if isinstance(value, bool) or not isinstance(value, str | int):
            return self.wrong(value, ctx, path, "a signal name such as USR1")
        problem = preemption_signal_problem(value)
        if problem is not None:
            return ctx.fail(path, problem)
        return signal_name(value)

    def schema(self) -> dict[str, Any]:
        return {"type": ["string", "integer"]}

    def model_type(self) -> str:
        return "str"


class EnvName(Str):
    """An environment variable's name; a bad one gets the name it could be."""

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if isinstance(value, str) and not re.fullmatch(ENV_KEY, value):
            fixed = re.sub(r"[^A-Za-z0-9_]", "_", value)
            fixed = fixed if re.fullmatch(ENV_KEY, fixed) else "_" + fixed
            return ctx.fail(
                path,
                f"{value!r} is not a shell variable name (letters, digits and _, not starting with a digit); "
                f"rename it, e.g. {fixed}",
            )
        return super().check(value, ctx, path)


class EnvValue(Str):
    """An environment variable's value: one text. Every problem says what to write instead."""

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        name = path[-1]
        if isinstance(value, list):
            joined = ":".join(str(v) for v in value[:3])
            return ctx.fail(
                path,
                f'is a list, but a variable holds one text; join the items yourself, e.g. {name}: "{joined}"',
            )
        if isinstance(value, dict):
            from slurmgen.spec import secrets  # a forwarded variable (`{from_env: NAME}`): loaded only for one

            source = value.get(secrets.FROM_ENV)
            if set(value) == {secrets.FROM_ENV} and isinstance(source, str) and re.fullmatch(ENV_KEY, source):
                return secrets.Forwarded(source)  # the value stays in the submitting environment (secrets.py)
            return ctx.fail(
                path,
                f'is a mapping, but a variable holds one text; give one value, e.g. {name}: "value", or forward a '
                f"variable of the submitting environment without writing it: {name}: {{{secrets.FROM_ENV}: {name}}}",
            )
        if value is None:
            return ctx.fail(path, f'is empty; write {name}: "" for an empty value, or remove the line')
        if isinstance(value, str) and len(value) > self.max_len:
            return ctx.fail(
                path,
                f"is {len(value)} characters long, over the limit of {self.max_len}; put the value in a file and "
                "read it in a setup line",
            )
        return super().check(value, ctx, path)

    def schema(self) -> dict[str, Any]:
        from slurmgen.spec import secrets

        name = {"type": "string", "pattern": f"^(?:{ENV_KEY})$"}
        forward = {"type": "object", "properties": {secrets.FROM_ENV: name}, "required": [secrets.FROM_ENV],
                   "additionalProperties": False}  # fmt: skip
        return {"anyOf": [super().schema(), forward]}


class EnvMap(Map):
    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if not isinstance(value, dict) and value is not REFUSED:
            shown = "a list" if isinstance(value, list) else f"{type(value).__name__} {value!r}"
            return ctx.fail(
                path, f"is {shown}; write one NAME: value per line under env:, e.g. env: {{OMP_NUM_THREADS: 8}}"
            )
        return super().check(value, ctx, path)


class Mount(Str):
    """A bind mount, /host:/container[:flags]; `${NAME}` is expanded by the batch shell (slurmgen/variables.py)."""

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if isinstance(value, str) and (bare := variables.bare_names(value)):
            # A bare $NAME is passed on as written, and no path starts with `$`: said here, with the spelling.
            return ctx.fail(
                path,
                f"{value!r} is not valid: ${bare[0]} is not expanded (the value is passed as written); write "
                f"${{{bare[0]}}}, which the batch shell expands, e.g. "
                + value.replace(f"${bare[0]}", f"${{{bare[0]}}}"),
            )
        return super().check(value, ctx, path)


@dataclass
class SetupLine(Str):
    """One item of setup or teardown: a shell line, or a block of lines (a YAML block scalar, `|`) run as written.
    Refused: what would end the batch script before slurmgen's own lines after it run (spec/setup_lines.py);
    teardown runs in a subshell, where `exit` and `exec` end only the subshell (``subshell``)."""

    subshell: bool = False

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if isinstance(value, str):
            from slurmgen.spec.setup_lines import item_problem

            if (problem := item_problem(value, ends_ok=self.subshell)) is not None:
                return ctx.fail(path, problem)
            # A line break is what a block keeps; every other character is checked as on one line.
            lines = value.split("\n")
            for line in lines:
                super().check(line, ctx, path)
            if len(value) > self.max_len:
                return ctx.fail(path, f"is {len(value)} characters long; the limit is {self.max_len}")
            return value
        return super().check(value, ctx, path)


def _text(**kw: object) -> Str:
    """Text that may land on an #SBATCH line."""
    return Str(directive=True, **kw)  # type: ignore[arg-type]


# Neither sbatch nor the script's quoting expands `~` (a quoted word is never tilde-expanded: bash(1), Tilde
# Expansion), so `output: ~/logs` made a directory named `~`. Refused, with what to write.
_NO_TILDE = r"(?!~).*"
_NO_TILDE_HINT = "~ is not expanded here (it would make a directory named ~); write the full path, e.g. $HOME's value"


def _path(**kw: object) -> Str:
    """A directory on an #SBATCH line or in the script: text that must not start with ~."""
    return Str(directive=True, pattern=_NO_TILDE, hint=_NO_TILDE_HINT, **kw)  # type: ignore[arg-type]


DISTRIBUTED = Obj(
    {
        "backend": Field(Enum(("nccl", "gloo")), "process-group backend; nccl with GPUs, gloo without", resolved=True),
        "port": Field(Int(min=1024, max=65535), "base rendezvous port", default=contract.DEFAULT_PORT),
        "port_range": Field(
            Int(min=1, max=20000), "the job uses port + job_id % port_range", default=contract.DEFAULT_PORT_RANGE
        ),
        "timeout": Field(Int(min=1, max=86400), "process-group timeout, seconds", default=contract.DEFAULT_PG_TIMEOUT),
        "barrier_timeout": Field(
            Int(min=1, max=86400),
            "seconds the start-up check-in and barrier() wait for every rank before failing with a diagnostic",
            default=contract.DEFAULT_BARRIER_TIMEOUT,
        ),
    },
    model="DistributedSpec",
)

PREEMPTION = Obj(
    {
        "enabled": Field(Bool(), "false switches preemption handling off (same as `preemption: false`)", default=True),
        "signal": Field(
            Signal(),
            "the 'checkpoint and requeue' signal Slurm sends before the time limit; on GPUs (NCCL) writing it, "
            "even as USR1, says it was chosen knowingly and silences the warning about NCCL 2.12, which caught USR1 "
            "(use HUP with that NCCL)",
            default=contract.DEFAULT_PREEMPT_SIGNAL,
        ),
        "handler": Field(
            Enum(contract.HANDLERS),
            "how the program takes part: runtime (it uses slurmgen's Preemption), program (it or its framework "
            "handles the signal itself; slurmgen delivers it and never requeues on its own), requeue (an unmodified "
            "program that resumes from its own checkpoints: the step is stopped with SIGTERM and the job requeued), "
            "auto (runtime when the program constructs Preemption, else requeue, with a warning)",
            default=contract.HANDLER_AUTO,
        ),
        "lead_time": Field(
            Int(min=1, max=65535),
            "seconds before the time limit at which the signal is sent (default 300, or a quarter of the limit)",
            resolved=True,
        ),
        "max_requeues": Field(
            Int(min=0, max=1000),
            "budget of the requeues the job causes itself (time limit, failure, its own request); past it the job "
            "ends with a message",
            default=5,
        ),
        "max_preemptions": Field(
            Int(min=0, max=1000000),
            "budget of the requeues after the scheduler preempted the job (not the job's fault); default: no limit",
        ),
        "keep": Field(
            Int(min=1, max=1000),
            "how many complete sharded checkpoints to keep (a plain state is one file, replaced by each save)",
            default=contract.DEFAULT_KEEP,
        ),
        "requeue_on_failure": Field(
            Bool(), "also requeue (within the budget) when the step fails without a signal", default=False
        ),
        "state_dir": Field(
            _path(),
            "directory for the resume state, on a filesystem every node sees (default <output>/state)",
            resolved=True,
        ),
    },
    model="PreemptionSpec",
)

TRACKERS = Obj(
    {
        "wandb": Field(
            Bool(),
            "export WANDB_RUN_ID=$SLURMGEN_RUN_ID and WANDB_RESUME=allow (unless set already), so that every run "
            "of the job continues one W&B run; false leaves W&B alone",
            default=True,
        ),
    },
    model="TrackersSpec",
)

# The container runtimes (spec/container.py checks which fields each takes; script/step.py and
# script/container_apptainer.py write their command lines).
CONTAINER_RUNTIMES = ("pyxis", "enroot", "apptainer", "singularity")
# What container.gpu hands into the image: apptainer(1) exec --nv (NVIDIA's driver and devices) or --rocm (AMD's).
CONTAINER_GPUS = ("nvidia", "rocm", "none")
# How slurmgen starts the tasks (docs/spec.md, Launchers): srun itself, or one per-node launcher per node.
LAUNCHERS = ("srun", "torchrun", "accelerate")
PER_NODE_LAUNCHERS = ("torchrun", "accelerate")

CONTAINER = Obj(
    {
        "runtime": Field(
            Enum(CONTAINER_RUNTIMES),
            "pyxis: srun --container-* options; enroot: enroot create/start without pyxis; apptainer: apptainer exec; "
            "singularity: the same options as apptainer, for Apptainer installed under the name singularity",
            default="pyxis",
        ),
        "gpu": Field(
            Enum(CONTAINER_GPUS),
            "the GPUs the image sees (apptainer, singularity): nvidia (--nv), rocm (--rocm) or none; default: nvidia "
            "when gpus_per_node asks for GPUs, else none. pyxis and enroot take nvidia only (enroot's NVIDIA hook)",
        ),
        "image": Field(
            _text(max_len=1024, expands=BATCH),
            "container image (pyxis --container-image; enroot: a squashfs file; apptainer: a .sif file, a sandbox "
            "directory or a docker://, oras://, library:// reference)",
            required=True,
        ),
        "python": Field(
            _text(max_len=1024),
            "the image's interpreter that runs slurmgen's runtime inside (default: the spec field python)",
        ),
        "mounts": Field(
            List(Mount(directive=True, pattern=MOUNT, hint="write /host/path:/container/path[:ro]", expands=BATCH)),
            "bind mounts, /host:/container[:flags] (apptainer --bind, pyxis --container-mounts, enroot --mount)",
        ),
        "env": Field(
            List(_text(pattern=ENV_KEY, hint="a variable name: letters, digits, _")),
            "variables of the job's environment passed into the container by name, besides SLURM_*, SLURMGEN_*, "
            "MASTER_* and the spec's env (which always are)",
        ),
        "workdir": Field(_text(pattern=r"/.*", hint="must be an absolute path"), "working directory"),
        "name": Field(_text(pattern=NAME, hint="letters, digits, ._-"), "named container, reused across steps"),
        "mount_home": Field(Bool(), "mount the user's home directory (pyxis default: yes)"),
        "writable": Field(Bool(), "make the container filesystem writable (pyxis, enroot)"),
        "writable_tmpfs": Field(Bool(), "apptainer --writable-tmpfs: writes go to memory and vanish with the task"),
        "cleanenv": Field(Bool(), "apptainer --cleanenv: the host's environment stays out (slurmgen passes its own)"),
        "containall": Field(
            Bool(), "apptainer --containall: own PID, IPC and mount namespaces, no host environment or home"
        ),
    },
    model="ContainerSpec",
)

TORCHRUN = Obj(
    {
        "extra_args": Field(
            List(Str(max_len=4096)),
            "arguments added to torchrun's (or accelerate launch's) own, e.g. [--role=trainer, --log-dir=/tmp/x]; "
            "those slurmgen sets itself are refused",
        ),
    },
    model="TorchrunSpec",
)

ARGV = List(Str(max_len=65536, expands=TASK), min_items=1)

SPEC = Obj(
    {
        "version": Field(Int(min=1, max=1), "spec format version", default=1, in_model=False),
        "name": Field(
            _text(pattern=NAME, max_len=200, hint="use letters, digits and ._- (start with a letter or digit)"),
            "job name: letters, digits, ._-",
            required=True,
        ),
        "command": Field(
            AnyOf(((str, Str(max_len=65536, expands=TASK)), (list, ARGV)), "a command line or a list of arguments"),
            "what every task runs: a list is argv, a string is split with shell rules",
            required=True,
        ),
        "time": Field(
            Time(directive=True, max_len=32),
            "time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS; left out, the partition's default applies "
            "(then preemption must be off: slurmgen cannot see that limit to signal before it)",
        ),
        "nodes": Field(Int(min=1, max=100000), "number of nodes", default=1),
        "gpus_per_node": Field(Int(min=0, max=64), "GPUs per node", default=0),
        "tasks_per_node": Field(
            Int(min=1, max=1024), "Slurm tasks per node (srun: one per GPU; torchrun, accelerate: 1)", resolved=True
        ),
        "nproc_per_node": Field(
            Int(min=1, max=1024),
            "torchrun and accelerate only: worker processes per node (default: gpus_per_node, or 1)",
            resolved=True,
        ),
        "cpus_per_task": Field(Int(min=1, max=4096), "CPUs per task"),
        "mem": Field(
            Mem(
                directive=True,
                pattern=MEM,
                numbers_ok=True,
                hint="a whole number with a unit K, M, G or T (e.g. 64G, 4000M), or 0 for all of the node's memory",
            ),
            "memory per node, e.g. 64G",
        ),
        "partition": Field(_text(max_len=256), "partition"),
        "account": Field(_text(max_len=256), "account"),
        "qos": Field(_text(max_len=256), "quality of service"),
        "constraint": Field(_text(max_len=1024), "node features, e.g. a100&ib"),
        "launcher": Field(
            Enum(
                LAUNCHERS,
                hint="the launcher is how slurmgen starts the tasks: srun (one task per GPU), torchrun or "
                "accelerate (one per node, which starts a worker per GPU); a program such as DeepSpeed reads the "
                "ranks that torchrun gives: run your script itself under launcher: torchrun (docs/spec.md, "
                "Launchers)",
            ),
            "srun: one task per GPU; torchrun: one torchrun per node; accelerate: one `accelerate launch` per node",
            default="srun",
        ),
        "torchrun": Field(
            TORCHRUN,
            "options of the per-node launcher (launcher: torchrun or accelerate)",
            resolved=True,
        ),
        "python": Field(_text(max_len=1024), "interpreter that runs slurmgen's runtime", default="python3"),
        "distributed": Field(DISTRIBUTED, "process group settings", resolved=True),
        "preemption": Field(
            AnyOf(((bool, Bool()), (dict, PREEMPTION)), "false or a mapping"),
            "checkpoint/requeue/resume handling; false switches it off",
            resolved=True,
        ),
        "recovery": Field(
            AnyOf(((bool, Bool()), (dict, RECOVERY)), "false or a mapping"),
            "restarts inside the allocation after a crash (docs/reliability.md, When things fail); "
            "false switches them off",
            resolved=True,
        ),
        "progress": Field(
            PROGRESS,
            "the step read from the program's own output, for a program without Preemption (docs/preemption.md, "
            "Progress without Preemption)",
        ),
        "checkpoint": Field(CHECKPOINT, "the program's own saves, which slurmgen watches (docs/preemption.md)"),
        "resume": Field(
            RESUME,
            "how the program is told to resume from checkpoint.path on a start after the first: args appended "
            "to the command, env set (docs/preemption.md)",
        ),
        "env": Field(
            EnvMap(
                EnvName(pattern=ENV_KEY, hint="a shell variable name"),
                EnvValue(numbers_ok=True, max_len=65536, expands=TASK),
            ),
            "environment variables for every task",
        ),
        "setup": Field(
            AnyOf(((str, SetupLine(max_len=65536)), (list, List(SetupLine(max_len=65536)))), "shell lines"),
            "shell lines (or blocks) run in the batch shell before launch (the one place for raw shell); what they "
            "export, source or cd into reaches the step",
        ),
        "setup_fail_fast": Field(
            Bool(),
            "a setup item that fails ends the job before the step, naming the item and its exit code; false runs "
            "the step anyway",
            default=True,
        ),
        "teardown": Field(
            AnyOf(
                ((str, SetupLine(max_len=65536, subshell=True)), (list, List(SetupLine(max_len=65536, subshell=True)))),
                "shell lines",
            ),
            "shell lines (or blocks) run after the step's last end, whatever its end, before the job exits; "
            "they never change the job's exit code",
        ),
        "container": Field(CONTAINER, "run every task inside this image (pyxis, enroot, apptainer or singularity)"),
        "trackers": Field(
            TRACKERS, "experiment trackers: how the job's run identity (SLURMGEN_RUN_ID) reaches them", resolved=True
        ),
        "output": Field(
            _path(max_len=1024, expands=SBATCH_LINE), "log directory; logs land per job id and per node", default="logs"
        ),
        "error": Field(
            _path(max_len=1024, expands=SBATCH_LINE),
            "directory for the batch shell's stderr apart from its stdout, in <error>/<name>-<jobid>.err; it must "
            "exist when the job starts (default: stderr goes with stdout into the output log)",
        ),
        "chdir": Field(_path(max_len=1024, expands=SBATCH_LINE), "working directory of the job"),
        "steps": Field(
            Int(min=1, max=1000),
            "run the command this many times, one after another, in one allocation (setup once; SLURMGEN_STEP_INDEX "
            "0, 1, ... in each); a requeued job resumes at the step that was interrupted",
            default=1,
        ),
        "array": Field(
            ArrayIndexes(directive=True, pattern=ARRAY, numbers_ok=True, hint="e.g. 0-15 or 1,3,5 or 0-99%10"),
            "job array indexes",
        ),
        "sweep": Field(
            SweepType(),
            "run one point per parameter set, as job arrays: grid, points, random, max_parallel; values reach the "
            "program through {name} placeholders in command and env",
        ),
        "dependency": Field(_text(pattern=DEPENDENCY, hint="e.g. afterok:123 or singleton"), "Slurm dependency"),
        "sbatch": Field(
            Map(
                Str(pattern=SBATCH_KEY, hint="an sbatch long option name without dashes"),
                AnyOf(
                    ((bool, Bool()), ((str, int, float), _text(numbers_ok=True, max_len=1024))),
                    "text, a number or true",
                ),
            ),
            "extra #SBATCH directives (the escape hatch): option: value, or option: true for a flag",
        ),
        "srun": Field(
            Map(
                Str(pattern=SRUN_KEY, hint="an srun long option name without dashes"),
                AnyOf(  # a word of the script's body, single-quoted: not an #SBATCH value (no directive rules)
                    ((bool, Bool()), ((str, int, float), Str(numbers_ok=True, max_len=1024))),
                    "text, a number or true",
                ),
            ),
            "extra options of the training step's srun (e.g. mpi: pmix, cpu-bind: cores, overcommit: true): "
            "option: value, or option: true for a flag; kill-on-bad-exit: false lets the other tasks run on when "
            "one fails",
        ),
    },
    model="JobFields",
)


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the job spec, for editors and `slurmgen schema`."""
    out = SPEC.schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://slurmgen.invalid/schema/job-spec-v1.json",
        "title": "slurmgen job spec v1",
        **out,
    }
