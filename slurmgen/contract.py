"""The contract between the rendered script and the runtime: variable names, exit codes, file names.

The renderer exports these variables in the batch script; the runtime reads them inside every task. The
runtime never reads YAML or spec objects, so this module is the only thing both sides share. `variables()` is the
one table of them: each row says where a variable comes from (the spec value the renderer exports, or who else
sets it), how the job context parses it, its default and who reads it. The renderer (slurmgen.script.render)
exports by iterating it, the job context's fields are generated from it (slurmgen.job_context.generate), and so is
the table of variables in docs/runtime-internals.md. Standard library only, and Python 3.9 (the batch shell's helper
and the task supervisor run on the host's or the image's interpreter): the runtime imports it inside every task.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays unloaded: every in-job process imports this module
if TYPE_CHECKING:
    from slurmgen.contract_variable import Variable


# --- variables the script exports for the runtime -------------------------------------------------------
JOB_NAME = "SLURMGEN_JOB_NAME"
SPEC_HASH = "SLURMGEN_SPEC_HASH"  # short hash of the resolved spec; keys the resume state to the job
LAUNCHER = "SLURMGEN_LAUNCHER"  # "srun" or "torchrun"
BACKEND = "SLURMGEN_BACKEND"  # "nccl" or "gloo"
PORT = "SLURMGEN_PORT"  # base port; the job uses PORT + job_id % PORT_RANGE
PORT_RANGE = "SLURMGEN_PORT_RANGE"
PG_TIMEOUT = "SLURMGEN_TIMEOUT"  # seconds, process-group timeout
BARRIER_TIMEOUT = "SLURMGEN_BARRIER_TIMEOUT"  # seconds, for the start-up check-in and barrier()
GPUS_PER_NODE = "SLURMGEN_GPUS_PER_NODE"
PREEMPT_SIGNAL = "SLURMGEN_PREEMPT_SIGNAL"  # signal name without SIG (DEFAULT_PREEMPT_SIGNAL); unset: preemption off
LEAD_TIME = "SLURMGEN_LEAD_TIME"  # seconds before the time limit at which the signal is sent
MAX_REQUEUES = "SLURMGEN_MAX_REQUEUES"  # budget of the requeues the job causes itself (time limit, failure)
MAX_PREEMPTIONS = "SLURMGEN_MAX_PREEMPTIONS"  # budget of requeues after a preemption; unset: no limit
REQUEUE_ON_FAILURE = "SLURMGEN_REQUEUE_ON_FAILURE"  # "1": the batch shell requeues a failed step (budget)
STATE_DIR = "SLURMGEN_STATE_DIR"  # where the resume state lives (shared filesystem)
TIME_LIMIT = "SLURMGEN_TIME_LIMIT"  # seconds; tells a time-limit signal from a preemption
CONTAINER = "SLURMGEN_CONTAINER"  # "1" when tasks run inside a container image (no scontrol there)
LOG_DIR = "SLURMGEN_LOG_DIR"  # the per-job log directory (per-node logs live here)
RESUME_FROM = "SLURMGEN_RESUME_FROM"  # `slurmgen resume` of a forgotten job: the key whose state to start from
SIGNALS = "SLURMGEN_SIGNALS"  # the batch shell tells its end step which signals it received: `SIG@epoch ...`
START_TIME = "SLURMGEN_START_TIME"  # epoch seconds at which this run's batch shell started (Slurm 22.05 has none)
RUN_ID = "SLURMGEN_RUN_ID"  # the job's identity, the same in every run of it (set by the batch shell, not here)
# A sweep's point (slurmgen.spec.sweep): its values as JSON, its index in the whole sweep, the sweep's id; and the
# index of the array's task 0 (a sweep split at MaxArraySize into several arrays; sbatch --export passes it).
SWEEP_PARAMS = "SLURMGEN_SWEEP_PARAMS"
SWEEP_INDEX = "SLURMGEN_SWEEP_INDEX"
SWEEP_ID = "SLURMGEN_SWEEP_ID"
SWEEP_OFFSET = "SLURMGEN_SWEEP_OFFSET"
KEEP = "SLURMGEN_KEEP"  # how many complete sharded checkpoints to keep (preemption.keep)
# Recovery inside the allocation (spec section recovery:; docs/reliability.md, "When things fail"):
MAX_RESTARTS = "SLURMGEN_MAX_RESTARTS"  # restarts of the step per run after a crash; 0 or unset: none
EXPEDITE = "SLURMGEN_EXPEDITE"  # "1": the job asked for an expedited requeue (recovery.expedite)
# "1" with `srun: {kill-on-bad-exit: false}`: a failing task leaves the others running and srun waits for all of
# them (srun(1) -K), so a later task's SIGTERM or stop is not the step's doing; unset: srun ends the step.
RUN_ON_BAD_EXIT = "SLURMGEN_RUN_ON_BAD_EXIT"
HANG_TIMEOUT = "SLURMGEN_HANG_TIMEOUT"  # seconds without progress on any rank; 0, empty or unset: no watchdog
SPARE_NODES = "SLURMGEN_SPARE_NODES"  # nodes allocated beyond the spec's `nodes`; unset: none
HEALTH_CHECK = "SLURMGEN_HEALTH_CHECK"  # the user's node check, one shell-quoted command line; unset: none
# Spec section progress: (a program without Preemption): the regular expression whose one group is the step in
# rank 0's output lines, and the step the run ends at; unset: the supervisor reads nothing of the output.
PROGRESS_PATTERN = "SLURMGEN_PROGRESS_PATTERN"
PROGRESS_TOTAL = "SLURMGEN_PROGRESS_TOTAL"
# The program's own saves (spec sections checkpoint: and resume:; slurmgen/spec/checkpoint.py):
CHECKPOINT = "SLURMGEN_CHECKPOINT"  # checkpoint.path as written: a file, a directory or a glob; unset: none
RESUME_ARGS = "SLURMGEN_RESUME_ARGS"  # resume.args, one shell-quoted command line; unset: none
RESUME_ENV = "SLURMGEN_RESUME_ENV"  # resume.env as shell-quoted NAME=value words; unset: none
# Set by a task that appended resume.args (never by the user): torchrun's workers, which run the task's entry point
# again under the agent that already did, must not append them a second time.
RESUMED = "SLURMGEN_RESUMED"
# Set by the batch shell for each start of the step within one run (never by the user): 0 for the first start,
# then 1, 2, ... for each restart inside the allocation. The rendezvous port moves with it (job_port).
STEP_ATTEMPT = "SLURMGEN_STEP_ATTEMPT"
# Spec field steps (the command N times in one allocation): N, exported when above 1; and, set by the batch shell
# before each of them, the index of the one running (0 to N-1). A requeued run starts at the first not done.
STEPS = "SLURMGEN_STEPS"
STEP_INDEX = "SLURMGEN_STEP_INDEX"
# How the program takes part in preemption (spec field preemption.handler; exported with the preemption signal):
PREEMPT_HANDLER = "SLURMGEN_PREEMPT_HANDLER"
HANDLER_AUTO = "auto"  # runtime when the program constructs Preemption (it announces itself), else requeue
HANDLER_RUNTIME = "runtime"  # the program uses slurmgen's Preemption
HANDLER_PROGRAM = "program"  # the program or its framework handles the signal; slurmgen never requeues on its own
HANDLER_REQUEUE = "requeue"  # an unmodified program: the batch shell stops the step gracefully and requeues
HANDLERS = (HANDLER_AUTO, HANDLER_RUNTIME, HANDLER_PROGRAM, HANDLER_REQUEUE)

# Between the entry points of one task (never set by the user): the process that starts the step's tasks and
# signals all of their processes (slurmstepd; the local fake srun). The outermost entry point sets it.
STEP_PID = "SLURMGEN_STEP_PID"
# In LOG_DIR, per run (READY_DIR + run number): one empty file per step task (named by SLURM_PROCID) once its entry
# point has blocked the preemption signal. The batch shell holds an early preemption signal until all are there.
READY_DIR = ".ready-run"
# handler: program, a Python program: the signal number its start-up hook unblocks once the program installs a
# handler for it (slurmgen.task.python_hook; the hook reads the name as its own constant).
UNBLOCK_ON_HANDLER = "SLURMGEN_UNBLOCK_ON_HANDLER"
# A Python program under the hang watchdog: the descriptor and signal its start-up hook registers faulthandler on,
# so the supervisor can ask for its stacks without py-spy (slurmgen.task.program_stacks; the hook has its own copy).
STACKS_FD = "SLURMGEN_STACKS_FD"
STACKS_SIGNAL = "SLURMGEN_STACKS_SIGNAL"
ERROR_FD = "SLURMGEN_ERROR_FD"

# Set by the runtime entry point in each task (never by the user): the standard torch names.
MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"
RANK = "RANK"
LOCAL_RANK = "LOCAL_RANK"
WORLD_SIZE = "WORLD_SIZE"
LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE"
NCCL_SOCKET_IFNAME = "NCCL_SOCKET_IFNAME"
GLOO_SOCKET_IFNAME = "GLOO_SOCKET_IFNAME"

# Set by the local emulator (slurmgen run) on a CPU run: a program that fails for want of a GPU there is not
# restarted (the batch shell's restart decision reads it; nothing else sets it).
LOCAL_NO_GPU = "SLURMGEN_LOCAL_NO_GPU"

# Set by Slurm (sbatch(1) and srun(1), OUTPUT ENVIRONMENT VARIABLES), torchrun's agent
# (torch/distributed/elastic/agent/server/api.py, torch/distributed/run.py) and slurmgen's own processes outside
# the rendered exports; the job context reads them beside the variables above.
JOB_ID = "SLURM_JOB_ID"
ARRAY_JOB_ID = "SLURM_ARRAY_JOB_ID"
ARRAY_TASK_ID = "SLURM_ARRAY_TASK_ID"
RESTART_COUNT = "SLURM_RESTART_COUNT"
PROCID = "SLURM_PROCID"
NODE_NAME = "SLURMD_NODENAME"
NODE_ID = "SLURM_NODEID"  # the node's index among the job's nodes: 0 for the first, where the batch shell runs
JOB_NODELIST = "SLURM_JOB_NODELIST"
STEP_NODELIST = "SLURM_STEP_NODELIST"
STEP_ID = "SLURM_STEP_ID"  # the step's number in the job: a new one for each srun, so for each start of the program
JOB_PARTITION = "SLURM_JOB_PARTITION"
# The run's SLUID (a job id unique across clusters and requeues), in the job's environment from Slurm 26.05
# (src/common/env.c `setup_env`, SchedMD/slurm commit 1524248add); 25.11 sets it for prologs and epilogs only.
JOB_SLUID = "SLURM_JOB_SLUID"
GPUS_ON_NODE = "SLURM_GPUS_ON_NODE"  # the GPUs Slurm gave the task's node (srun(1), OUTPUT ENVIRONMENT VARIABLES)
SUBMIT_DIR = "SLURM_SUBMIT_DIR"
BATCH_SCRIPT = "SLURMGEN_BATCH_SCRIPT"  # the batch shell's $0 (slurmgen.batch.continuation)
LOCAL_DIR = "SLURMGEN_LOCAL_DIR"  # the local run's directory (slurmgen/local/)
NODE_CHECK_TIMEOUT = "SLURMGEN_NODE_CHECK_TIMEOUT"  # seconds for one node's checks (slurmgen.batch.nodes)
ELASTIC_RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT"
ELASTIC_AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE"
ELASTIC_SIGNALS = "TORCHELASTIC_SIGNALS_TO_HANDLE"
# torch/distributed/run.py, --signals-to-handle: the signals torchrun's agent handles when the variable is unset.
DEFAULT_ELASTIC_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")

# --- entry points the rendered script runs (python3 -m NAME) -----------------------------------------------
BATCH_ENTRY = (
    "slurmgen.batch"  # the batch shell's helper: begin | signal SIG [PID] | restart RC ATTEMPT | watch PID SIG | end RC
)
TASK_ENTRY = "slurmgen.task"  # each task's entry point and supervisor; also `--rendezvous` in the batch shell
TASK_MAIN = "slurmgen.task.launch"  # where TASK_ENTRY's main() lives (the container bootstrap imports it)
NODE_CHECK_ENTRY = "slurmgen.batch.node_check"  # one node's checks, a step of the batch shell's (batch/nodes.py)
# The names run by scripts rendered before slurmgen.batch and slurmgen.task existed (slurmgen.runtime held every
# process): a job queued before an upgrade runs its old script with the new package, so these stay as forwarders.
LEGACY_ENTRIES = {"slurmgen.runtime.batch": BATCH_ENTRY, "slurmgen.runtime.launch": TASK_ENTRY}

# --- defaults shared by the spec and the runtime ---------------------------------------------------------
DEFAULT_PORT = 8738
DEFAULT_PORT_RANGE = 127
DEFAULT_PG_TIMEOUT = 600
DEFAULT_BARRIER_TIMEOUT = 60
DEFAULT_KEEP = 2
# The preemption signal when the spec names none (preemption.signal); the runtime's too, outside slurmgen's script.
DEFAULT_PREEMPT_SIGNAL = "USR1"
# Linux's default ephemeral range (/proc/sys/net/ipv4/ip_local_port_range). The spec checks against this;
# the runtime re-checks against the machine's actual range.
DEFAULT_EPHEMERAL = (32768, 60999)

# --- the batch shell and the runtime agree on these --------------------------------------------------------
# A task that wants a requeue but cannot run scontrol (inside a container) writes this marker in STATE_DIR;
# the batch shell, which runs outside the container, requeues the job when the step ends and the marker is
# there.
REQUEUE_MARKER_SUFFIX = ".requeue"
# The batch shell appends each signal that reaches it to this file in LOG_DIR (emptied as each run starts); its
# preemption watcher (batch/watch.py) reads it to know whether the notice came.
BATCH_SIGNALS_FILE = ".batch-signals"
# Seconds between the watcher's looks at the job (`scontrol show job`); the environment may set another.
PREEMPT_POLL = "SLURMGEN_PREEMPT_POLL"
DEFAULT_PREEMPT_POLL = 10.0

# --- the table of the variables: where each comes from, its parse, its default, who reads it ----------------------
# Who sets a variable (Variable.set_by). FROM_SPEC: the renderer, from the spec value in `spec`; the others set it
# in the job as it runs.
FROM_SPEC = "spec"  # the script's exports, rendered from the spec
FROM_BATCH_SHELL = "batch shell"  # the rendered script's shell code, as the job runs
FROM_TASK_ENTRY = "task entry"  # each task's entry point (slurmgen.task), for the processes it starts
FROM_SLURM = "Slurm"
FROM_TORCHRUN = "torchrun"
FROM_SUBMITTER = "submitter"  # sbatch --export from slurmgen (a sweep's array, `slurmgen resume`)
FROM_LOCAL_RUN = "local run"  # the local emulator (`slurmgen run --local`)
FROM_USER = "user"  # the job's environment as the user sets it (the spec's env, the submitting shell)
# Who reads it (Variable.readers).
BY_SCRIPT = "script"  # the rendered script's own shell code
BY_BATCH = "batch"  # the batch shell's helper (slurmgen.batch)
BY_TASK = "task"  # each task's entry point and supervisor (slurmgen.task)
BY_RUNTIME = "runtime"  # the user's program (slurmgen.runtime)
BY_PROGRAM = "program"  # the user's program itself, or its framework
# When the renderer leaves an exported variable out (Variable.omit).
OMIT_NONE = "none"  # the spec value is None
OMIT_EMPTY = "empty"  # the spec value is empty, 0 or false
OMIT_DEFAULT = "default"  # the spec value is the row's default


def variables() -> tuple[Variable, ...]:
    """The table of the variables: the exports first, in the order the script writes them (the golden scripts in
    tests/script/golden hold it), then the variables others set. Built on each call, not at import: every in-job
    process imports this module for the names, and none of them reads the table (the job context's fields are
    generated from it); the renderer calls it once per script."""
    from slurmgen.contract_variable import Variable

    def _exported(
        name: str,
        spec: str,
        doc: str,
        readers: tuple[str, ...],
        field: str,
        parse: str,
        default: object = None,
        when: str = "",
        omit: str = "",
    ) -> Variable:
        return Variable(name, doc, FROM_SPEC, readers, field, parse, default, spec, when, omit)

    pre = "preemption.enabled"
    in_job = (BY_BATCH, BY_TASK, BY_RUNTIME)
    return (
        _exported(
            JOB_NAME,
            "name",
            "the job's name; tells a slurmgen batch job from an interactive one",
            (BY_RUNTIME,),
            "job_name",
            "text",
        ),
        _exported(
            SPEC_HASH,
            "digest",
            "short hash of the resolved spec; keys the resume state to the job",
            in_job,
            "spec_hash",
            "given",
        ),
        _exported(LAUNCHER, "launcher", "srun or torchrun", (BY_PROGRAM,), "launcher", "text"),
        _exported(
            BACKEND, "distributed.backend", "the process-group backend, nccl or gloo", (BY_RUNTIME,), "backend", "text"
        ),
        _exported(
            PORT,
            "distributed.port",
            "base rendezvous port; the job uses PORT + job id % PORT_RANGE",
            (BY_TASK, BY_RUNTIME),
            "port",
            "integer",
            default=DEFAULT_PORT,
        ),
        _exported(
            PORT_RANGE,
            "distributed.port_range",
            "how many ports the job's rendezvous port ranges over",
            (BY_TASK, BY_RUNTIME),
            "port_range",
            "integer",
            default=DEFAULT_PORT_RANGE,
        ),
        _exported(
            PG_TIMEOUT,
            "distributed.timeout",
            "process-group timeout, seconds",
            (BY_RUNTIME,),
            "pg_timeout",
            "number",
            default=DEFAULT_PG_TIMEOUT,
        ),
        _exported(
            BARRIER_TIMEOUT,
            "distributed.barrier_timeout",
            "seconds for the start-up check-in and barrier()",
            (BY_RUNTIME,),
            "barrier_timeout",
            "number",
            default=DEFAULT_BARRIER_TIMEOUT,
        ),
        _exported(GPUS_PER_NODE, "gpus_per_node", "GPUs per node", (BY_BATCH, BY_TASK), "gpus_per_node", "whole"),
        _exported(
            TIME_LIMIT,
            "time_seconds",
            "the time limit in seconds; tells a time-limit signal from a preemption",
            in_job,
            "time_limit",
            "seconds",
            omit=OMIT_NONE,
        ),
        _exported(
            PREEMPT_SIGNAL,
            "preemption.signal",
            "the preemption signal's name without SIG; unset: preemption off",
            in_job,
            "preempt_signal",
            "text",
            default=DEFAULT_PREEMPT_SIGNAL,
            when=pre,
        ),
        _exported(
            PREEMPT_HANDLER,
            "preemption.handler",
            "how the program takes part in preemption (HANDLERS)",
            in_job,
            "handler",
            "handler",
            default=HANDLER_AUTO,
            when=pre,
        ),
        _exported(
            LEAD_TIME,
            "preemption.lead_time",
            "seconds before the time limit at which the signal is sent",
            in_job,
            "lead_time",
            "lead",
            when=pre,
        ),
        _exported(
            MAX_REQUEUES,
            "preemption.max_requeues",
            "budget of the requeues the job causes itself (time limit, failure)",
            (BY_BATCH, BY_RUNTIME),
            "max_requeues",
            "whole",
            when=pre,
        ),
        _exported(
            KEEP,
            "preemption.keep",
            "how many complete sharded checkpoints to keep",
            (BY_RUNTIME,),
            "keep",
            "integer",
            default=DEFAULT_KEEP,
            when=pre,
            omit=OMIT_DEFAULT,
        ),
        _exported(
            MAX_PREEMPTIONS,
            "preemption.max_preemptions",
            "budget of requeues after a preemption; unset: no limit",
            (BY_BATCH, BY_RUNTIME),
            "max_preemptions",
            "whole",
            when=pre,
            omit=OMIT_NONE,
        ),
        _exported(
            REQUEUE_ON_FAILURE,
            "preemption.requeue_on_failure",
            "1: the batch shell requeues a failed step (within the budget)",
            (BY_BATCH,),
            "requeue_on_failure",
            "flag",
            when=pre,
            omit=OMIT_EMPTY,
        ),
        _exported(
            MAX_RESTARTS,
            "recovery.max_restarts",
            "restarts of the step per run after a crash; 0 or unset: none",
            (BY_BATCH,),
            "max_restarts",
            "count",
            default=0,
        ),
        _exported(
            EXPEDITE,
            "recovery.expedite",
            "1: the job asked for an expedited requeue; a run that ends for good clears the job's requeue flag",
            (BY_BATCH,),
            "expedite",
            "flag",
            omit=OMIT_EMPTY,
        ),
        _exported(
            STEPS,
            "steps",
            "how many times the command runs, one after another, in one allocation",
            (BY_BATCH,),
            "steps",
            "count",
            default=1,
            omit=OMIT_DEFAULT,
        ),
        _exported(
            RUN_ON_BAD_EXIT,
            "run_on_bad_exit",
            "1: srun: {kill-on-bad-exit: false}, a failing task leaves the others running; unset: srun ends the step",
            (BY_BATCH,),
            "run_on_bad_exit",
            "flag",
            omit=OMIT_EMPTY,
        ),
        _exported(
            HANG_TIMEOUT,
            "recovery.hang_timeout",
            "seconds without progress on any rank; 0, empty or unset: no watchdog",
            (BY_BATCH, BY_TASK, BY_RUNTIME),
            "hang_timeout",
            "positive",
        ),
        _exported(
            SPARE_NODES,
            "recovery.spare_nodes",
            "nodes allocated beyond the spec's nodes; unset: none",
            (BY_BATCH,),
            "spare_nodes",
            "whole",
            omit=OMIT_EMPTY,
        ),
        _exported(
            HEALTH_CHECK,
            "recovery.health_check",
            "the user's node check, one shell-quoted command line; unset: none",
            (BY_BATCH,),
            "health_check",
            "verbatim",
            default="",
            omit=OMIT_EMPTY,
        ),
        _exported(
            PROGRESS_PATTERN,
            "progress.pattern",
            "the regular expression whose one group is the step in rank 0's output; unset: not read",
            (BY_TASK,),
            "progress_pattern",
            "verbatim",
            default="",
            omit=OMIT_EMPTY,
        ),
        _exported(
            PROGRESS_TOTAL,
            "progress.total",
            "the step the run ends at (progress.pattern's ETA); unset: none",
            (BY_TASK,),
            "progress_total",
            "whole",
            omit=OMIT_EMPTY,
        ),
        _exported(
            CHECKPOINT,
            "checkpoint.path",
            "where the program writes its own saves (a file, a directory or a glob); unset: none",
            (BY_TASK,),
            "checkpoint",
            "text",
            when="checkpoint",
        ),
        _exported(
            RESUME_ARGS,
            "resume.args",
            "words appended to the command on a start after the first where the checkpoint exists, one "
            "shell-quoted command line; unset: none",
            (BY_TASK,),
            "resume_args",
            "verbatim",
            default="",
            when="resume",
            omit=OMIT_EMPTY,
        ),
        _exported(
            RESUME_ENV,
            "resume.env",
            "NAME=value words (shell-quoted) set for the program on those same starts; unset: none",
            (BY_TASK,),
            "resume_env",
            "verbatim",
            default="",
            when="resume",
            omit=OMIT_EMPTY,
        ),
        _exported(
            CONTAINER,
            "container",
            "1 when the tasks run inside a container image (no scontrol there)",
            in_job,
            "in_container",
            "flag",
            omit=OMIT_EMPTY,
        ),
        # Set by the script's shell code as the job runs.
        Variable(
            LOG_DIR,
            "the per-job log directory; its history/ is the run history",
            FROM_BATCH_SHELL,
            in_job,
            "log_dir",
            "nonempty",
        ),
        Variable(
            STATE_DIR,
            "where the resume state lives (preemption.state_dir, on a shared file system)",
            FROM_BATCH_SHELL,
            in_job,
            "state_dir",
            "nonempty",
        ),
        Variable(
            START_TIME,
            "epoch seconds at which this run's batch shell started (Slurm 22.05 has none)",
            FROM_BATCH_SHELL,
            in_job,
            "start_time",
            "seconds",
        ),
        Variable(
            RUN_ID,
            "the job's identity, the same in every run of it",
            FROM_BATCH_SHELL,
            (BY_RUNTIME, BY_PROGRAM),
            "run_id",
            "text",
        ),
        Variable(
            SIGNALS,
            "the signals the batch shell received, `SIG@epoch ...`, for its end step",
            FROM_BATCH_SHELL,
            (BY_BATCH,),
            "signals",
            "stamped_signals",
        ),
        Variable(
            STEP_INDEX,
            "with spec field steps: which of the steps runs, 0 to steps - 1 (unset: the only one)",
            FROM_BATCH_SHELL,
            (BY_BATCH, BY_TASK, BY_RUNTIME),
            "step_index",
            "count",
            default=0,
        ),
        Variable(
            STEP_ATTEMPT,
            "the start of the step within this run: 0, then 1, 2, ... for each restart in the "
            "allocation; the rendezvous port moves with it",
            FROM_BATCH_SHELL,
            (BY_TASK, BY_RUNTIME),
            "step_attempt",
            "count",
            default=0,
        ),
        Variable(
            BATCH_SCRIPT,
            "the batch shell's $0, for a continuation job",
            FROM_BATCH_SHELL,
            (BY_BATCH,),
            "batch_script",
            "verbatim",
            default="",
        ),
        Variable(
            NODE_CHECK_TIMEOUT,
            "seconds for one node's checks (default 60)",
            FROM_BATCH_SHELL,
            (BY_BATCH,),
            "node_check_timeout",
            "seconds",
        ),
        Variable(SWEEP_PARAMS, "a sweep point's values as JSON", FROM_BATCH_SHELL, (BY_SCRIPT, BY_PROGRAM)),
        Variable(SWEEP_INDEX, "a sweep point's index in the whole sweep", FROM_BATCH_SHELL, (BY_SCRIPT, BY_PROGRAM)),
        Variable(SWEEP_ID, "the sweep's id", FROM_SUBMITTER, (BY_SCRIPT, BY_PROGRAM)),
        Variable(
            SWEEP_OFFSET,
            "the index of the array's task 0 (a sweep split at MaxArraySize)",
            FROM_SUBMITTER,
            (BY_SCRIPT,),
        ),
        Variable(
            RESUME_FROM,
            "`slurmgen resume` of a forgotten job: the key whose state to start from",
            FROM_SUBMITTER,
            (BY_RUNTIME,),
            "resume_from",
            "text",
        ),
        # Set by each task's entry point for the processes it starts.
        Variable(
            STEP_PID,
            "the process that signals the step's tasks (slurmstepd; locally the fake srun)",
            FROM_TASK_ENTRY,
            (BY_TASK,),
            "step_pid",
            "nonempty",
        ),
        Variable(
            RESUMED,
            "1 once a task appended resume.args: torchrun's workers do not append them again",
            FROM_TASK_ENTRY,
            (BY_TASK,),
            "resumed",
            "flag",
        ),
        Variable(
            MASTER_ADDR,
            "the rendezvous host (torch's name)",
            FROM_TASK_ENTRY,
            (BY_RUNTIME, BY_PROGRAM),
            "master_addr",
            "given",
        ),
        Variable(
            MASTER_PORT,
            "the rendezvous port (torch's name)",
            FROM_TASK_ENTRY,
            (BY_TASK, BY_RUNTIME, BY_PROGRAM),
            "master_port",
            "text",
        ),
        Variable(
            NCCL_SOCKET_IFNAME,
            "NCCL's network interface",
            FROM_TASK_ENTRY,
            (BY_RUNTIME, BY_PROGRAM),
            "nccl_ifname",
            "given",
        ),
        Variable(
            GLOO_SOCKET_IFNAME,
            "Gloo's network interface",
            FROM_TASK_ENTRY,
            (BY_RUNTIME, BY_PROGRAM),
            "gloo_ifname",
            "given",
        ),
        # Where a process sits (slurmgen.job_context.ranks parses them together, torchrun's before Slurm's).
        Variable(
            RANK, "the global rank (torchrun's, else set from Slurm's)", FROM_TASK_ENTRY, (BY_RUNTIME, BY_PROGRAM)
        ),
        Variable(LOCAL_RANK, "the rank on this node", FROM_TASK_ENTRY, (BY_RUNTIME, BY_PROGRAM)),
        Variable(WORLD_SIZE, "how many ranks", FROM_TASK_ENTRY, (BY_RUNTIME, BY_PROGRAM)),
        Variable(LOCAL_WORLD_SIZE, "how many ranks on this node", FROM_TASK_ENTRY, (BY_RUNTIME, BY_PROGRAM)),
        # For a Python program's start-up hook (slurmgen/task/pyhook/, which imports nothing of slurmgen).
        Variable(
            UNBLOCK_ON_HANDLER,
            "handler program: the signal the hook unblocks once the program installs a handler for it",
            FROM_TASK_ENTRY,
            (BY_PROGRAM,),
        ),
        Variable(STACKS_FD, "the descriptor the hook's faulthandler writes stacks to", FROM_TASK_ENTRY, (BY_PROGRAM,)),
        Variable(STACKS_SIGNAL, "the signal that asks the hook for the stacks", FROM_TASK_ENTRY, (BY_PROGRAM,)),
        Variable(
            ERROR_FD,
            "the descriptor the hook writes the program's uncaught exception to",
            FROM_TASK_ENTRY,
            (BY_PROGRAM,),
        ),
        Variable(
            PREEMPT_POLL,
            "seconds between the preemption watcher's looks at the job (0.1 to 300)",
            FROM_USER,
            (BY_BATCH,),
            "preempt_poll",
            "seconds",
            default=DEFAULT_PREEMPT_POLL,
        ),
        Variable(
            LOCAL_DIR, "inside `slurmgen run --local`: its directory", FROM_LOCAL_RUN, in_job, "local_dir", "nonempty"
        ),
        Variable(
            LOCAL_NO_GPU,
            "1 on a local run on CPU: a failure for want of a GPU is not restarted",
            FROM_LOCAL_RUN,
            (BY_BATCH,),
            "local_no_gpu",
            "flag",
        ),
        # Slurm's.
        Variable(
            JOB_ID,
            "the job's id: what `scontrol show step` and `scancel` take (empty outside Slurm)",
            FROM_SLURM,
            in_job,
            "job_id",
            "verbatim",
            default="",
        ),
        Variable(
            RESTART_COUNT,
            "how many times Slurm restarted the job; unset (not 0) on the first run",
            FROM_SLURM,
            in_job,
            "restart_count",
            "restarts",
        ),
        Variable(
            PROCID,
            "this task's index in the step (under torchrun the node's); empty outside a step",
            FROM_SLURM,
            (BY_TASK, BY_RUNTIME),
            "task_id",
            "verbatim",
            default="",
        ),
        Variable(NODE_NAME, "the node as Slurm names it", FROM_SLURM, in_job, "node_name", "nonempty"),
        Variable(
            NODE_ID,
            "the node's index in the job, 0 for the first (the batch shell's)",
            FROM_SLURM,
            in_job,
            "node_id",
            "whole",
        ),
        Variable(JOB_NODELIST, "the job's nodes, a hostlist expression", FROM_SLURM, in_job, "nodes", "given"),
        Variable(
            STEP_NODELIST, "the step's nodes (inside a step)", FROM_SLURM, (BY_TASK, BY_RUNTIME), "step_nodes", "given"
        ),
        Variable(STEP_ID, "the step's number in the job (inside a step)", FROM_SLURM, (BY_TASK,), "step_id", "whole"),
        Variable(JOB_PARTITION, "the job's partition", FROM_SLURM, (BY_BATCH,), "partition", "given"),
        Variable(JOB_SLUID, "the run's SLUID (Slurm 26.05+)", FROM_SLURM, (BY_BATCH,), "sluid", "given"),
        Variable(
            GPUS_ON_NODE,
            "the GPUs Slurm gave this node (GPUs asked for in sbatch:, too); 0 when unset",
            FROM_SLURM,
            (BY_TASK,),
            "gpus_on_node",
            "count",
            default=0,
        ),
        Variable(SUBMIT_DIR, "the directory sbatch ran in", FROM_SLURM, (BY_BATCH,), "submit_dir", "nonempty"),
        Variable(ARRAY_TASK_ID, "the array task's index", FROM_SLURM, in_job, "array_task_id", "nonempty"),
        Variable(ARRAY_JOB_ID, "the array's job id; with the task's index, the job key", FROM_SLURM, in_job),
        # torchrun's agent's.
        Variable(
            ELASTIC_RESTART_COUNT,
            "torchrun's worker-group restarts (0 outside torchrun): keys a barrier per attempt",
            FROM_TORCHRUN,
            (BY_RUNTIME,),
            "elastic_restart_count",
            "count",
            default=0,
        ),
        Variable(
            ELASTIC_AGENT_STORE,
            "True: torchrun's agent hosts the rendezvous store",
            FROM_TORCHRUN,
            (BY_RUNTIME,),
            "elastic_agent_store",
            "true_flag",
        ),
        Variable(
            ELASTIC_SIGNALS,
            "the signals torchrun's agent handles, comma-separated",
            FROM_TORCHRUN,
            (BY_TASK,),
            "elastic_signals",
            "names",
            default=DEFAULT_ELASTIC_SIGNALS,
        ),
    )


# Exit codes (a stopping task's, the node check's): slurmgen/exit_codes.py, with every other code.

# The signals the runtime understands; the names are Slurm's and bash's spelling (no SIG prefix).
CLEAN_EXIT_SIGNAL = "USR2"
SAVE_EXIT_SIGNAL = "TERM"


def job_port(base: int, port_range: int, job_id: int, attempt: int = 0) -> int:
    """The rendezvous port of a job: PORT + job id % PORT_RANGE, so jobs that share a node rarely collide. A
    restart inside the allocation (``attempt`` 1, 2, ...) takes the next port of the range: the old step's store may
    still hold its port in TIME_WAIT, and a straggler of it must never join the new rendezvous."""
    return base + (job_id + attempt) % port_range


def rank_log_name(rank: int) -> str:
    """File name (inside LOG_DIR) of one rank's own log: everything the program prints, and nothing else's."""
    return f"rank-{rank}.log"


def requeue_marker_name(job_key: str) -> str:
    """File name (inside STATE_DIR) of the requeue request for one job, e.g. ``1234_5.requeue``."""
    return job_key + REQUEUE_MARKER_SUFFIX
