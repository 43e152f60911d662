"""The contract between the rendered script and the runtime: variable names, exit codes, file names.

The renderer exports these variables in the batch script; the runtime reads them inside every task. The
runtime never reads YAML or spec objects, so this module is the only thing both sides share. Standard library
only: the runtime imports it inside every task.
"""

from __future__ import annotations

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
PREEMPT_SIGNAL = "SLURMGEN_PREEMPT_SIGNAL"  # signal name without SIG ("USR1"); unset when preemption is off
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
# Recovery inside the allocation (spec section recovery:; README, "When things fail"):
MAX_RESTARTS = "SLURMGEN_MAX_RESTARTS"  # restarts of the step per run after a crash; 0 or unset: none
HANG_TIMEOUT = "SLURMGEN_HANG_TIMEOUT"  # seconds without progress on any rank; 0, empty or unset: no watchdog
SPARE_NODES = "SLURMGEN_SPARE_NODES"  # nodes allocated beyond the spec's `nodes`; unset: none
HEALTH_CHECK = "SLURMGEN_HEALTH_CHECK"  # the user's node check, one shell-quoted command line; unset: none
# Set by the batch shell for each start of the step within one run (never by the user): 0 for the first start,
# then 1, 2, ... for each restart inside the allocation. The rendezvous port moves with it (job_port).
STEP_ATTEMPT = "SLURMGEN_STEP_ATTEMPT"
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
