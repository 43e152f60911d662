"""Generated from the contract's table (slurmgen.contract.variables()) by `python -m slurmgen.job_context.generate`:
do not edit.

The job variables as typed fields, one per row of the table that has a field, each parsed by its row's parser, then
what derives from them (slurmgen/job_context/values.py). The job context (slurmgen/job_context/context.py) is
JobVariables with its questions about ranks. Python 3.9: the batch shell's helper and the task supervisor import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from slurmgen import contract
from slurmgen.job_context.values import (
    Malformed,
    count,
    flag,
    given,
    handler,
    integer,
    key_from,
    lead,
    lead_seconds_from,
    names,
    nonempty,
    number,
    positive,
    requeue_marker_from,
    restarts,
    run_from,
    seconds,
    stamped_signals,
    text,
    true_flag,
    verbatim,
    whole,
)

TYPE_CHECKING = False  # typing stays unloaded: every process imports this
if TYPE_CHECKING:
    from typing_extensions import Self


@dataclass(frozen=True)
class JobVariables:
    """The job variables, read once, and what derives from them."""

    job_name: str | None  # SLURMGEN_JOB_NAME
    spec_hash: str | None  # SLURMGEN_SPEC_HASH
    launcher: str | None  # SLURMGEN_LAUNCHER
    backend: str | None  # SLURMGEN_BACKEND
    port: int | Malformed  # SLURMGEN_PORT
    port_range: int | Malformed  # SLURMGEN_PORT_RANGE
    pg_timeout: float | Malformed  # SLURMGEN_TIMEOUT
    barrier_timeout: float | Malformed  # SLURMGEN_BARRIER_TIMEOUT
    gpus_per_node: int | None  # SLURMGEN_GPUS_PER_NODE
    time_limit: float | None  # SLURMGEN_TIME_LIMIT
    preempt_signal: str | None  # SLURMGEN_PREEMPT_SIGNAL
    handler: str  # SLURMGEN_PREEMPT_HANDLER
    lead_time: float | None  # SLURMGEN_LEAD_TIME
    max_requeues: int | None  # SLURMGEN_MAX_REQUEUES
    keep: int | Malformed  # SLURMGEN_KEEP
    max_preemptions: int | None  # SLURMGEN_MAX_PREEMPTIONS
    requeue_on_failure: bool  # SLURMGEN_REQUEUE_ON_FAILURE
    max_restarts: int  # SLURMGEN_MAX_RESTARTS
    expedite: bool  # SLURMGEN_EXPEDITE
    steps: int  # SLURMGEN_STEPS
    run_on_bad_exit: bool  # SLURMGEN_RUN_ON_BAD_EXIT
    hang_timeout: int | None  # SLURMGEN_HANG_TIMEOUT
    spare_nodes: int | None  # SLURMGEN_SPARE_NODES
    health_check: str  # SLURMGEN_HEALTH_CHECK
    progress_pattern: str  # SLURMGEN_PROGRESS_PATTERN
    progress_total: int | None  # SLURMGEN_PROGRESS_TOTAL
    checkpoint: str | None  # SLURMGEN_CHECKPOINT
    resume_args: str  # SLURMGEN_RESUME_ARGS
    resume_env: str  # SLURMGEN_RESUME_ENV
    in_container: bool  # SLURMGEN_CONTAINER
    log_dir: str | None  # SLURMGEN_LOG_DIR
    state_dir: str | None  # SLURMGEN_STATE_DIR
    start_time: float | None  # SLURMGEN_START_TIME
    run_id: str | None  # SLURMGEN_RUN_ID
    signals: tuple[tuple[str, float | None], ...]  # SLURMGEN_SIGNALS
    step_index: int  # SLURMGEN_STEP_INDEX
    step_attempt: int  # SLURMGEN_STEP_ATTEMPT
    batch_script: str  # SLURMGEN_BATCH_SCRIPT
    node_check_timeout: float | None  # SLURMGEN_NODE_CHECK_TIMEOUT
    resume_from: str | None  # SLURMGEN_RESUME_FROM
    step_pid: str | None  # SLURMGEN_STEP_PID
    resumed: bool  # SLURMGEN_RESUMED
    master_addr: str | None  # MASTER_ADDR
    master_port: str | None  # MASTER_PORT
    nccl_ifname: str | None  # NCCL_SOCKET_IFNAME
    gloo_ifname: str | None  # GLOO_SOCKET_IFNAME
    preempt_poll: float | None  # SLURMGEN_PREEMPT_POLL
    local_dir: str | None  # SLURMGEN_LOCAL_DIR
    local_no_gpu: bool  # SLURMGEN_LOCAL_NO_GPU
    job_id: str  # SLURM_JOB_ID
    restart_count: int  # SLURM_RESTART_COUNT
    task_id: str  # SLURM_PROCID
    node_name: str | None  # SLURMD_NODENAME
    node_id: int | None  # SLURM_NODEID
    nodes: str | None  # SLURM_JOB_NODELIST
    step_nodes: str | None  # SLURM_STEP_NODELIST
    step_id: int | None  # SLURM_STEP_ID
    partition: str | None  # SLURM_JOB_PARTITION
    sluid: str | None  # SLURM_JOB_SLUID
    gpus_on_node: int  # SLURM_GPUS_ON_NODE
    submit_dir: str | None  # SLURM_SUBMIT_DIR
    array_task_id: str | None  # SLURM_ARRAY_TASK_ID
    elastic_restart_count: int  # TORCHELASTIC_RESTART_COUNT
    elastic_agent_store: bool  # TORCHELASTIC_USE_AGENT_STORE
    elastic_signals: tuple[str, ...]  # TORCHELASTIC_SIGNALS_TO_HANDLE
    key: str | None  # job_key_of: None outside Slurm
    requeue_marker: str | None  # the marker a task leaves in state_dir for the batch shell
    run: int  # this run's number in the run history: 1 for the first (restart_count + 1)
    lead_seconds: int | None  # lead_time as the spec gave it (whole seconds), for the site's window
    environ: Mapping[str, str] = field(repr=False, compare=False)  # the whole environment, to hand to a child

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Self:
        """Every field from ``environ``, each by its parser."""
        return cls(
            job_name=text(environ, contract.JOB_NAME),
            spec_hash=given(environ, contract.SPEC_HASH),
            launcher=text(environ, contract.LAUNCHER),
            backend=text(environ, contract.BACKEND),
            port=integer(environ, contract.PORT, contract.DEFAULT_PORT),
            port_range=integer(environ, contract.PORT_RANGE, contract.DEFAULT_PORT_RANGE),
            pg_timeout=number(environ, contract.PG_TIMEOUT, contract.DEFAULT_PG_TIMEOUT),
            barrier_timeout=number(environ, contract.BARRIER_TIMEOUT, contract.DEFAULT_BARRIER_TIMEOUT),
            gpus_per_node=whole(environ, contract.GPUS_PER_NODE),
            time_limit=seconds(environ, contract.TIME_LIMIT),
            preempt_signal=text(environ, contract.PREEMPT_SIGNAL),
            handler=handler(environ, contract.PREEMPT_HANDLER, "auto"),
            lead_time=lead(environ, contract.LEAD_TIME),
            max_requeues=whole(environ, contract.MAX_REQUEUES),
            keep=integer(environ, contract.KEEP, contract.DEFAULT_KEEP),
            max_preemptions=whole(environ, contract.MAX_PREEMPTIONS),
            requeue_on_failure=flag(environ, contract.REQUEUE_ON_FAILURE),
            max_restarts=count(environ, contract.MAX_RESTARTS, 0),
            expedite=flag(environ, contract.EXPEDITE),
            steps=count(environ, contract.STEPS, 1),
            run_on_bad_exit=flag(environ, contract.RUN_ON_BAD_EXIT),
            hang_timeout=positive(environ, contract.HANG_TIMEOUT),
            spare_nodes=whole(environ, contract.SPARE_NODES),
            health_check=verbatim(environ, contract.HEALTH_CHECK, ""),
            progress_pattern=verbatim(environ, contract.PROGRESS_PATTERN, ""),
            progress_total=whole(environ, contract.PROGRESS_TOTAL),
            checkpoint=text(environ, contract.CHECKPOINT),
            resume_args=verbatim(environ, contract.RESUME_ARGS, ""),
            resume_env=verbatim(environ, contract.RESUME_ENV, ""),
            in_container=flag(environ, contract.CONTAINER),
            log_dir=nonempty(environ, contract.LOG_DIR),
            state_dir=nonempty(environ, contract.STATE_DIR),
            start_time=seconds(environ, contract.START_TIME),
            run_id=text(environ, contract.RUN_ID),
            signals=stamped_signals(environ, contract.SIGNALS),
            step_index=count(environ, contract.STEP_INDEX, 0),
            step_attempt=count(environ, contract.STEP_ATTEMPT, 0),
            batch_script=verbatim(environ, contract.BATCH_SCRIPT, ""),
            node_check_timeout=seconds(environ, contract.NODE_CHECK_TIMEOUT),
            resume_from=text(environ, contract.RESUME_FROM),
            step_pid=nonempty(environ, contract.STEP_PID),
            resumed=flag(environ, contract.RESUMED),
            master_addr=given(environ, contract.MASTER_ADDR),
            master_port=text(environ, contract.MASTER_PORT),
            nccl_ifname=given(environ, contract.NCCL_SOCKET_IFNAME),
            gloo_ifname=given(environ, contract.GLOO_SOCKET_IFNAME),
            preempt_poll=seconds(environ, contract.PREEMPT_POLL),
            local_dir=nonempty(environ, contract.LOCAL_DIR),
            local_no_gpu=flag(environ, contract.LOCAL_NO_GPU),
            job_id=verbatim(environ, contract.JOB_ID, ""),
            restart_count=restarts(environ, contract.RESTART_COUNT),
            task_id=verbatim(environ, contract.PROCID, ""),
            node_name=nonempty(environ, contract.NODE_NAME),
            node_id=whole(environ, contract.NODE_ID),
            nodes=given(environ, contract.JOB_NODELIST),
            step_nodes=given(environ, contract.STEP_NODELIST),
            step_id=whole(environ, contract.STEP_ID),
            partition=given(environ, contract.JOB_PARTITION),
            sluid=given(environ, contract.JOB_SLUID),
            gpus_on_node=count(environ, contract.GPUS_ON_NODE, 0),
            submit_dir=nonempty(environ, contract.SUBMIT_DIR),
            array_task_id=nonempty(environ, contract.ARRAY_TASK_ID),
            elastic_restart_count=count(environ, contract.ELASTIC_RESTART_COUNT, 0),
            elastic_agent_store=true_flag(environ, contract.ELASTIC_AGENT_STORE),
            elastic_signals=names(environ, contract.ELASTIC_SIGNALS, contract.DEFAULT_ELASTIC_SIGNALS),
            key=key_from(environ),
            requeue_marker=requeue_marker_from(environ),
            run=run_from(environ),
            lead_seconds=lead_seconds_from(environ),
            environ=environ,
        )
