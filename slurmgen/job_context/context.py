"""`JobContext`: this process's job, read once from its environment at the entry point and passed down."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from slurmgen import contract
from slurmgen.job_context.ranks import Ranks, process_rank, read_ranks
from slurmgen.job_context.values import (
    ARRAY_TASK_ID,
    JOB_ID,
    flag,
    hang_timeout_from,
    key_from,
    restart_count_from,
    seconds,
    text,
    whole,
)

# Variables that are no part of the contract module: the batch shell's $0 (slurmgen.batch.continuation), the local
# run's directory (slurmgen/local/), the node check's time limit.
BATCH_SCRIPT = "SLURMGEN_BATCH_SCRIPT"
LOCAL_DIR = "SLURMGEN_LOCAL_DIR"
NODE_CHECK_TIMEOUT = "SLURMGEN_NODE_CHECK_TIMEOUT"
# torchrun's agent (torch/distributed/elastic/agent/server/api.py, torch/distributed/run.py).
ELASTIC_RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT"
ELASTIC_AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE"
ELASTIC_SIGNALS = "TORCHELASTIC_SIGNALS_TO_HANDLE"


@dataclass(frozen=True)
class JobContext:
    """This process's job, read once: its key, run, directories, preemption settings, budgets and limits."""

    key: str | None  # job_key_of: None outside Slurm
    requeue_marker: str | None  # the name of the marker a task leaves in state_dir for the batch shell (None: no key)
    job_id: str  # SLURM_JOB_ID ("" outside Slurm): what `scontrol show step` and `scancel` take for the step
    restart_count: int  # SLURM_RESTART_COUNT, 0 on the first run
    run: int  # this run's number in the run history: 1 for the first (restart_count + 1)
    log_dir: str | None  # the per-job log directory; its history/ is the run history (None outside the script)
    state_dir: str | None  # where the resume state lives
    preempt_signal: str | None  # "USR1"; None when preemption is off (unset or blank)
    handler: str  # preemption.handler, auto when unset or unknown
    max_requeues: int | None  # preemption.max_requeues; None: no limit
    max_preemptions: int | None  # preemption.max_preemptions; None: no limit
    requeue_on_failure: bool
    in_container: bool  # the tasks run in a container image: no scontrol there
    start_time: float | None  # this run's batch shell start (epoch seconds)
    time_limit: float | None  # seconds
    lead_time: float | None  # seconds before the time limit at which the signal comes
    lead_seconds: int | None  # the same, as the spec gave it (whole seconds), for the site's window
    spec_hash: str | None  # None when unset: a job not rendered by slurmgen
    signals: str  # SLURMGEN_SIGNALS: what reached the batch shell, `SIG@epoch ...`
    hang_timeout: int | None  # recovery.hang_timeout; None: the watchdog is off (values.hang_timeout_from)
    max_restarts: int  # recovery.max_restarts; 0 when unset or not a whole number
    health_check: str  # the user's node check command line, "" for none
    gpus_per_node: int | None  # None when unset or not a whole number
    resume_from: str | None  # `slurmgen resume`: the key whose state to start from
    run_id: str | None  # the job's identity across its runs
    keep: str  # preemption.keep as exported ("" when unset); the checkpoint layout checks it
    backend: str | None  # "nccl" or "gloo"; None: chosen from the devices
    pg_timeout: str  # process-group timeout in seconds, as exported; dist parses it with its default
    barrier_timeout: str
    preempt_poll: str  # the preemption watcher's poll period, as set; batch/watch.py bounds it
    step_pid: str | None  # the process that signals the step's tasks (set by the outermost task entry point)
    step_attempt: int  # the start of the step within this run: 0 first, 1, 2, ... for restarts in the allocation
    master_addr: str | None  # set by the batch shell or the user
    master_port: str | None
    port: str  # the rendezvous port's base and range as exported ("" when unset); rendezvous checks them
    port_range: str
    nccl_ifname: str | None
    gloo_ifname: str | None
    task_id: str  # SLURM_PROCID ("" outside a step): this task's index in the step (under torchrun the node's)
    node_name: str | None  # SLURMD_NODENAME: the node as Slurm names it
    nodes: str | None  # SLURM_JOB_NODELIST (a hostlist expression)
    step_nodes: str | None  # SLURM_STEP_NODELIST: the step's nodes (inside a step)
    partition: str | None
    submit_dir: str | None
    array_task_id: str | None
    batch_script: str  # the batch shell's $0 ("" when unset)
    node_check_timeout: float | None
    local_dir: str | None  # inside `slurmgen run --local`: its directory
    local_no_gpu: bool  # a local run on CPU (contract.LOCAL_NO_GPU): a failure for want of a GPU is not restarted
    elastic_restart_count: str  # torchrun's worker-group restarts ("0" outside torchrun): keys a barrier per attempt
    elastic_agent_store: bool  # torchrun's agent hosts the rendezvous store
    elastic_signals: str  # the signals torchrun's agent handles (its default when unset)
    environ: Mapping[str, str] = field(repr=False, compare=False)  # the whole environment, to hand to a child

    @cached_property
    def ranks(self) -> Ranks:
        """Where this process sits: torchrun's variables, else Slurm's, else a single process. Read on first use:
        the batch shell has none, and an inconsistent pair is an error only for a process that asks."""
        return read_ranks(self.environ)

    @cached_property
    def rank(self) -> int:
        """This process's rank from the environment, never an error (job_context.ranks.process_rank): for a
        question about rank 0 or a name in a message; `ranks` where the world size matters."""
        return process_rank(self.environ)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> JobContext:
        handler = environ.get(contract.PREEMPT_HANDLER, "")
        lead = environ.get(contract.LEAD_TIME, "")
        attempt = environ.get(contract.STEP_ATTEMPT, "").strip()
        key = key_from(environ)
        return cls(
            key=key,
            requeue_marker=None if key is None else contract.requeue_marker_name(key),
            job_id=environ.get(JOB_ID, ""),
            restart_count=(restarts := restart_count_from(environ)),
            run=restarts + 1,
            log_dir=environ.get(contract.LOG_DIR) or None,
            state_dir=environ.get(contract.STATE_DIR) or None,
            preempt_signal=text(environ, contract.PREEMPT_SIGNAL),
            handler=handler if handler in contract.HANDLERS else contract.HANDLER_AUTO,
            max_requeues=whole(environ, contract.MAX_REQUEUES),
            max_preemptions=whole(environ, contract.MAX_PREEMPTIONS),
            requeue_on_failure=flag(environ, contract.REQUEUE_ON_FAILURE),
            in_container=flag(environ, contract.CONTAINER),
            start_time=seconds(environ, contract.START_TIME),
            time_limit=seconds(environ, contract.TIME_LIMIT),
            lead_time=float(environ.get(contract.LEAD_TIME) or 0) if _lead_ok(environ) else None,
            lead_seconds=int(lead) if lead.isdigit() else None,
            spec_hash=environ.get(contract.SPEC_HASH),
            signals=environ.get(contract.SIGNALS, ""),
            hang_timeout=hang_timeout_from(environ),
            max_restarts=whole(environ, contract.MAX_RESTARTS) or 0,
            health_check=environ.get(contract.HEALTH_CHECK, ""),
            gpus_per_node=whole(environ, contract.GPUS_PER_NODE),
            resume_from=text(environ, contract.RESUME_FROM),
            run_id=text(environ, contract.RUN_ID),
            keep=environ.get(contract.KEEP, "").strip(),
            backend=text(environ, contract.BACKEND),
            pg_timeout=environ.get(contract.PG_TIMEOUT, "").strip(),
            barrier_timeout=environ.get(contract.BARRIER_TIMEOUT, "").strip(),
            preempt_poll=environ.get(contract.PREEMPT_POLL, ""),
            step_pid=environ.get(contract.STEP_PID) or None,
            step_attempt=int(attempt) if attempt.isdigit() and attempt.isascii() else 0,
            master_addr=environ.get(contract.MASTER_ADDR),
            master_port=text(environ, contract.MASTER_PORT),
            port=environ.get(contract.PORT, "").strip(),
            port_range=environ.get(contract.PORT_RANGE, "").strip(),
            nccl_ifname=environ.get(contract.NCCL_SOCKET_IFNAME),
            gloo_ifname=environ.get(contract.GLOO_SOCKET_IFNAME),
            task_id=environ.get("SLURM_PROCID", ""),
            node_name=environ.get("SLURMD_NODENAME") or None,
            nodes=environ.get("SLURM_JOB_NODELIST"),
            step_nodes=environ.get("SLURM_STEP_NODELIST"),
            partition=environ.get("SLURM_JOB_PARTITION"),
            submit_dir=environ.get("SLURM_SUBMIT_DIR") or None,
            array_task_id=environ.get(ARRAY_TASK_ID) or None,
            batch_script=environ.get(BATCH_SCRIPT, ""),
            node_check_timeout=seconds(environ, NODE_CHECK_TIMEOUT),
            local_dir=environ.get(LOCAL_DIR) or None,
            local_no_gpu=environ.get(contract.LOCAL_NO_GPU) == "1",
            elastic_restart_count=environ.get(ELASTIC_RESTART_COUNT, "0"),
            elastic_agent_store=environ.get(ELASTIC_AGENT_STORE) == "True",
            elastic_signals=environ.get(ELASTIC_SIGNALS, "SIGTERM,SIGINT,SIGHUP,SIGQUIT"),
            environ=environ,
        )

    @classmethod
    def of(cls, source: JobContext | Mapping[str, str]) -> JobContext:
        """A context as given, or one read from a mapping (the entry points accept either)."""
        return source if isinstance(source, JobContext) else cls.from_environ(source)


def _lead_ok(environ: Mapping[str, str]) -> bool:
    try:
        float(environ.get(contract.LEAD_TIME) or 0)
    except ValueError:
        return False
    return True
