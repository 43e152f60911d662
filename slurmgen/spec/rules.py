"""Defaults that depend on other fields, and the checks that span fields (errors and warnings).

Every rule here exists because a real cluster or a peer tool broke on it; the comment says where.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Any

from slurmgen import contract, variables
from slurmgen.errors import Problem
from slurmgen.signal_names import parse_sbatch_signal
from slurmgen.slurm.times import format_duration, parse_time, slurm_minutes
from slurmgen.spec.extra_options import check_sbatch, check_srun
from slurmgen.spec.fields import PER_NODE_LAUNCHERS, PREEMPTION, SPEC
from slurmgen.spec.recovery import resolve_recovery
from slurmgen.spec.types import AnyOf, Ctx, Obj
from slurmgen.spec.yaml_source import dotted

# Slurm checks for jobs near their time limit every 30 s (PERIODIC_TIMEOUT in slurmctld.h), so a `--signal`
# may come up to 30 s early; we also want the job to have started and installed its handlers by then.
SIGNAL_SLACK = 60
DEFAULT_LEAD = 300
TYPICAL_CHECKPOINT = 60
BARE_MEM_WARN = 1024  # a unit-less mem below this many MB is most likely meant as GB

_SECRET = re.compile(r"(?i)(secret|token|passw|api_?key|access_?key|private_?key|credential)")
_SHELL_OPS = {"|", "||", "&&", ";", ">", ">>", "<", "&", "2>", "2>&1"}
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh"}


def _path_problem(text: str) -> str | None:
    if not text.strip().strip("/"):
        # `output: ""` made every path under it absolute: logs and resume state landed in / itself.
        shown = "empty" if not text.strip() else "the root directory /"
        return f"is {shown}, which puts the job's files directly under /; give a directory, e.g. logs"
    if "\\" in text:
        return "contains a backslash, which makes Slurm ignore every %-pattern in the path; remove it"
    if "%" in text:
        return "contains %, which Slurm expands in log paths; slurmgen adds the job id itself, so remove it"
    if ".." in text.split("/"):
        return "contains `..`; give a path inside the project or an absolute path"
    return None


def _bare_shell_ops(text: str) -> list[str]:
    """The shell operators that stand as words of their own, unquoted, in a string command (`a | b`, not `'|'`)."""
    masked, quote, escaped = [], "", False
    for char in text:
        if escaped:
            masked.append("x")
            escaped = False
        elif char == "\\" and quote != "'":
            masked.append("x")
            escaped = True
        elif quote:
            masked.append("x")
            quote = "" if char == quote else quote
        elif char in "'\"":
            masked.append("x")
            quote = char
        else:
            masked.append(char)
    return sorted(set("".join(masked).split()) & _SHELL_OPS)


def resolve(f: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    """Fill defaults that depend on other fields; record problems that span fields."""
    out = dict(f)
    # Left out, no --time is written and the partition's DefaultTime (slurm.conf(5)) applies: a limit slurmgen
    # does not know, so neither the script nor the runtime is told one.
    seconds = parse_time(f["time"]) if "time" in f else None
    out["time_seconds"] = None if seconds is None else slurm_minutes(seconds) * 60
    out["time"] = format_duration(out["time_seconds"]) if "time" in f else None
    cmd = f["command"]
    if isinstance(cmd, str):
        try:
            cmd = shlex.split(cmd)
        except ValueError as exc:
            ctx.fail(("command",), f"cannot split the command with shell rules ({exc}); check the quotes")
            cmd = ["?"]
        if not cmd:
            ctx.fail(("command",), "is empty; give the program to run, e.g. [python, train.py]")
        ops = _bare_shell_ops(f["command"])
        if ops:
            # The string is split with shell quoting rules but never run by a shell: `python t.py | tee out` ran
            # t.py with `|`, `tee`, `out` as its arguments, and the job COMPLETED without the file.
            ctx.fail(
                ("command",),
                f"{' '.join(ops)} is shell syntax, but the command is not run by a shell (its words become the "
                "program's arguments); write the command as a list, or put the pipeline in a script and run that",
            )
    if cmd and not cmd[0].strip():
        ctx.fail(("command", 0), "the program name is empty")
    out["command"] = cmd
    gpus = _given(f, SPEC, "gpus_per_node")
    out["gpus_per_node"] = gpus
    out["nodes"] = _given(f, SPEC, "nodes")
    out["launcher"] = launcher = _given(f, SPEC, "launcher")
    out["python"] = _given(f, SPEC, "python")
    _resolve_tasks(out, f, ctx, gpus, launcher)
    out["distributed"] = _resolve_distributed(f.get("distributed", {}), gpus, ctx)
    out["preemption"] = _resolve_preemption(f.get("preemption", {}), f, out["time_seconds"], ctx)
    out["recovery"] = resolve_recovery(f.get("recovery", {}), ctx)
    env = f.get("env", {})
    for key in env:
        if key.startswith("SLURMGEN_"):
            ctx.fail(("env", key), "SLURMGEN_* variables are set by slurmgen itself; use another name")
    out["env"] = env
    for key in ("setup", "teardown"):
        lines = f.get(key, [])
        out[key] = [lines] if isinstance(lines, str) else lines
        for i, line in enumerate(out[key]):
            if "\r" in line:
                ctx.fail((key, i), "contains a carriage return (CR); save the file with Unix line ends")
    out["setup_fail_fast"] = f.get("setup_fail_fast", True)
    if "resume" in f and "checkpoint" not in f:
        # The resume flag is given only where the program's checkpoint exists: without its path, never.
        ctx.fail(("resume",), "needs checkpoint.path, where the program saves, e.g. checkpoint: {path: out/ckpt.pt}")
    if isinstance(f.get("resume"), dict):
        for name in f["resume"].get("env") or {}:
            if isinstance(name, str) and name.startswith("SLURMGEN_"):
                ctx.fail(("resume", "env", name), "SLURMGEN_* variables are set by slurmgen itself; use another name")
    if isinstance(f.get("container"), dict):
        from slurmgen.spec.container import check_container  # loaded only for a spec with a container

        check_container(f["container"], ctx)
    out["trackers"] = {"wandb": f.get("trackers", {}).get("wandb", True)}
    out["output"] = _given(f, SPEC, "output")
    for key in ("output", "error", "chdir"):
        if key in f and (msg := _path_problem(f[key])):
            ctx.fail((key,), msg)
    out["sbatch"] = check_sbatch(f.get("sbatch", {}), out["preemption"]["enabled"], ctx, gpus)
    out["torchrun"] = _resolve_torchrun(f.get("torchrun", {}), launcher, ctx)
    out["srun"] = check_srun(f.get("srun", {}), ctx)
    _keep_given(f, out)
    return out


def _keep_given(f: dict[str, Any], out: dict[str, Any]) -> None:
    """A field of a nested table that its resolver above does not name (one newly added to the table) keeps the
    value given in the file; the fields a resolver returns are its own."""
    for key, field in SPEC.fields.items():
        given, resolved = f.get(key), out.get(key)
        tables = [option for _, option in field.type.options] if isinstance(field.type, AnyOf) else [field.type]
        if isinstance(given, dict) and isinstance(resolved, dict) and any(isinstance(t, Obj) for t in tables):
            out[key] = {**given, **resolved}


def _resolve_tasks(out: dict[str, Any], f: dict[str, Any], ctx: Ctx, gpus: int, launcher: str) -> None:
    per_gpu = gpus if gpus > 0 else 1
    if launcher == "srun":
        tasks = f.get("tasks_per_node", per_gpu)
        if gpus > 0 and tasks != gpus:
            ctx.fail(
                ("tasks_per_node",),
                f"the srun launcher runs one task per GPU: use {gpus} (or leave it out); for one task per node that "
                "starts a worker per GPU, write launcher: torchrun (or launcher: accelerate for `accelerate "
                "launch`; docs/spec.md, Launchers)",
            )
        if "nproc_per_node" in f:
            ctx.fail(("nproc_per_node",), "only for launcher: torchrun or accelerate; with srun set tasks_per_node")
        out["tasks_per_node"] = out["nproc_per_node"] = tasks
        return
    tasks = f.get("tasks_per_node", 1)
    if tasks != 1:
        ctx.fail(
            ("tasks_per_node",),
            f"{launcher} runs one task per node that starts the workers: use 1 (set nproc_per_node for workers)",
        )
    nproc = f.get("nproc_per_node", per_gpu)
    if gpus > 0 and nproc != gpus:
        ctx.fail(("nproc_per_node",), f"{launcher} starts one worker per GPU: use {gpus} (or leave it out)")
    out["tasks_per_node"] = 1
    out["nproc_per_node"] = nproc


def _resolve_torchrun(t: dict[str, Any], launcher: str, ctx: Ctx) -> dict[str, Any]:
    args = list(t.get("extra_args", []))
    if args and launcher not in PER_NODE_LAUNCHERS:
        ctx.fail(
            ("torchrun", "extra_args"),
            f"passes arguments to the per-node launcher, but launcher is {launcher}; write launcher: torchrun (or "
            "accelerate), or remove torchrun",
        )
    elif args:
        from slurmgen.spec.launcher_args import check_extra_args  # loaded only for a spec that gives some

        check_extra_args(args, launcher, ctx)
    return {"extra_args": args}


def _resolve_distributed(d: dict[str, Any], gpus: int, ctx: Ctx) -> dict[str, Any]:
    backend = d.get("backend", "nccl" if gpus > 0 else "gloo")
    if backend == "nccl" and gpus == 0:
        ctx.fail(("distributed", "backend"), "nccl needs GPUs: set gpus_per_node, or use gloo for a CPU job")
    port = d.get("port", contract.DEFAULT_PORT)
    span = d.get("port_range", contract.DEFAULT_PORT_RANGE)
    last = port + span - 1
    low, high = contract.DEFAULT_EPHEMERAL
    if last > 65535:
        ctx.fail(("distributed", "port_range"), f"ports {port}-{last} go past 65535; lower port or port_range")
    elif port <= high and last >= low:
        ctx.fail(
            ("distributed", "port_range"),
            f"ports {port}-{last} reach into the ephemeral range {low}-{high}, where the kernel picks ports for "
            f"outgoing connections, so the rendezvous port may already be taken; keep the range below {low} "
            f"or above {high}",
        )
    return {
        "backend": backend,
        "port": port,
        "port_range": span,
        "timeout": d.get("timeout", contract.DEFAULT_PG_TIMEOUT),
        "barrier_timeout": d.get("barrier_timeout", contract.DEFAULT_BARRIER_TIMEOUT),
    }


def _given(values: dict[str, Any], table: Obj, key: str) -> Any:
    """The value written in the spec, else the field table's default (one place for every default)."""
    return values.get(key, table.fields[key].default)


def _resolve_preemption(p: Any, f: dict[str, Any], limit: int | None, ctx: Ctx) -> dict[str, Any]:
    if isinstance(p, bool):
        p = {"enabled": p}
    enabled = _given(p, PREEMPTION, "enabled")
    signal = _given(p, PREEMPTION, "signal")
    state_dir = p.get("state_dir", _given(f, SPEC, "output").rstrip("/") + "/state")
    if "state_dir" in p and (msg := _path_problem(state_dir)):
        ctx.fail(("preemption", "state_dir"), msg)
    lead = p.get("lead_time")
    if enabled:
        if "time" not in f:
            ctx.fail(
                ("time",),
                "is left out, so the partition's default time limit applies, which slurmgen cannot see to send the "
                'preemption signal before it; give time (e.g. time: "04:00:00"), or set preemption: false',
            )
        elif limit is None:
            ctx.fail(("time",), "an unlimited job never gets the preemption signal; give a limit or preemption: false")
        else:
            cut = lead is None and limit // 4 < DEFAULT_LEAD
            if lead is None:
                lead = min(DEFAULT_LEAD, max(1, limit // 4))
            if lead >= limit - SIGNAL_SLACK:
                where = ("preemption", "lead_time") if "lead_time" in p else ("time",)
                room = limit - SIGNAL_SLACK - 1
                fix = f"use a lead_time of at most {room} s or a longer time" if room > 0 else "give a longer time"
                left = f"leaves {limit - lead} s of" if lead < limit else "is not below"
                ctx.fail(
                    where,
                    f"a lead time of {lead} s {left} the {format_duration(limit)} limit; Slurm "
                    f"checks every 30 s, so it could signal at start and requeue in a loop; {fix}, "
                    "or preemption: false",
                )
            elif cut:
                ctx.note(("time",), ("preemption", "lead_time"), cut_lead_message(lead, limit))
    return {
        "enabled": bool(enabled),
        "signal": signal,
        "handler": _given(p, PREEMPTION, "handler"),
        "lead_time": lead or 0,
        "max_requeues": _given(p, PREEMPTION, "max_requeues"),
        "max_preemptions": p.get("max_preemptions"),
        "keep": _given(p, PREEMPTION, "keep"),
        "requeue_on_failure": _given(p, PREEMPTION, "requeue_on_failure"),
        "state_dir": state_dir,
    }


def cut_lead_message(lead: int, limit: int) -> str:
    """The note said when ``lead_time`` was left out and the limit is too short for DEFAULT_LEAD: the user asked for
    nothing and gets a signal earlier than the documented default, so every command says what it chose and why."""
    return (
        f"not given, so {lead} s, a quarter of the {format_duration(limit)} limit: the default {DEFAULT_LEAD} s is "
        f"for limits of {format_duration(4 * DEFAULT_LEAD)} or more, and would take too much of a shorter job; "
        "give lead_time to choose"
    )


def _nccl_may_take_usr1(pre: dict[str, Any], dist: dict[str, Any], ctx: Ctx) -> bool:
    """Whether NCCL 2.12's SIGUSR1 handler (NVIDIA/nccl#704) could hide the preemption signal from the program: only
    an NCCL program that gets the signal itself (handler requeue stops the step with SIGTERM instead), and only
    with the default signal: a `signal` written in the spec, USR1 included, is the user's choice made knowingly."""
    return (
        pre["signal"] == contract.DEFAULT_PREEMPT_SIGNAL
        and dist["backend"] == "nccl"
        and pre["handler"] != contract.HANDLER_REQUEUE
        and ctx.raw(("preemption", "signal")) is None
    )


def cross_check(f: dict[str, Any], ctx: Ctx) -> list[Problem]:
    """Warnings: legal specs that are likely mistakes. Each names the field and what to do."""
    warnings: list[Problem] = []

    def warn(path: tuple[str | int, ...], message: str) -> None:
        warnings.append(Problem(ctx.where(path), dotted(path), message))

    pre, dist = f["preemption"], f["distributed"]
    raw_time = ctx.raw(("time",))
    if raw_time is not None and f["time_seconds"] and parse_time(raw_time.raw) != f["time_seconds"]:
        warn(("time",), f"Slurm rounds seconds up to whole minutes: {raw_time.raw} becomes {f['time']}")
    if dist["backend"] == "gloo" and f["gpus_per_node"] > 0:
        warn(("distributed", "backend"), "gloo with GPUs only reduces CPU tensors; GPU training wants nccl")
    if pre["enabled"]:
        if _nccl_may_take_usr1(pre, dist, ctx):
            # Where the cause is written: the GPUs (or backend: nccl) that chose NCCL; the signal is not written.
            cause = ("distributed", "backend") if ctx.raw(("distributed", "backend")) else ("gpus_per_node",)
            warnings.append(
                Problem(
                    ctx.where(cause),
                    "preemption.signal",
                    "the default USR1 is lost under NCCL 2.12 only, which caught it for a debug dump "
                    "(NVIDIA/nccl#704, fixed in 2.13; torch's own wheels never shipped 2.12): with NCCL 2.12 "
                    "write signal: HUP; with any other NCCL write signal: USR1 to keep it, which also "
                    "silences this warning",
                )
            )
        if pre["lead_time"] < TYPICAL_CHECKPOINT:
            warn(
                ("preemption", "lead_time"),
                f"{pre['lead_time']} s is shorter than a typical checkpoint; make sure saving fits, or raise it",
            )
        if dist["timeout"] >= pre["lead_time"] and ctx.raw(("distributed", "timeout")) is not None:
            warn(
                ("distributed", "timeout"),
                f"{dist['timeout']} s is not below preemption.lead_time ({pre['lead_time']} s): a rank stuck in a "
                "collective cannot save before the limit; lower the timeout or raise the lead time",
            )
    mem = f.get("mem")
    if mem is not None and mem.isdigit() and 0 < int(mem) < BARE_MEM_WARN:
        # sbatch(1) --mem: "Default units are megabytes"; `mem: 32` meant as gigabytes would starve the job.
        warn(("mem",), f"{mem} without a unit is {mem} MB for Slurm; write {mem}G for gigabytes or {mem}M to keep it")
    for path, value in _expanding_values(f):
        if bare := variables.bare_names(value):
            warn(path, bare_variable_message(value, bare[0]))
    if f["env"]:
        _env_warnings(f["env"], warn)
    if f["setup"]:
        _setup_warnings(f, warn)
    cmd = f["command"]
    ops = sorted(set(cmd) & _SHELL_OPS)
    if ops:
        warn(
            ("command",),
            f"{' '.join(ops)} is passed to your program as an argument, not run by a shell; "
            "put shell pipelines in a script",
        )
    if cmd and cmd[0].endswith(".py"):
        warn(
            ("command",),
            f"{cmd[0]} is run as a program, so it needs a #! line and the executable bit; "
            f"write [python, {cmd[0]}, ...] to run it with Python",
        )
    if cmd and cmd[0].rsplit("/", 1)[-1] in _SHELLS and pre["enabled"]:
        warn(
            ("command",),
            "a shell wrapper does not pass signals on to its child; end the shell's command "
            "with `exec your-program ...` so the preemption signal reaches it",
        )
    return warnings


def _expanding_values(f: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """The values in which `${NAME}` is expanded (slurmgen/variables.py), with their paths; mounts refuse a bare
    `$NAME` themselves (no path starts with `$`)."""
    out: list[tuple[tuple[str | int, ...], str]] = [(("command", i), w) for i, w in enumerate(f["command"])]
    out += [(("env", k), v) for k, v in f["env"].items() if type(v) is str]  # not a forwarded name (secrets.py)
    container = f.get("container")
    if container:
        out.append((("container", "image"), container["image"]))
    return out


def bare_variable_message(value: str, name: str) -> str:
    """The one warning for a `$NAME` without braces, wherever `${NAME}` is expanded."""
    return (
        f"${name} is not expanded: the task gets the text {value!r} as written; write ${{{name}}} to have it "
        f"expanded, or $${name} to keep the $ and silence this warning"
    )


def _env_warnings(env: dict[str, Any], warn: Callable[[tuple[str | int, ...], str], None]) -> None:
    """Slurm's own variables, and secrets written into the script. Only a spec with env loads the token patterns
    (spec/secrets.py)."""
    from slurmgen.spec import secrets

    for key, value in env.items():
        if key.startswith("SLURM_"):
            warn(("env", key), "SLURM_* variables are Slurm's own; setting one can change how srun places tasks")
        elif isinstance(value, str) and secrets.looks_like_token(value):
            warn(
                ("env", key),
                "looks like a token written into the script, where every copy of it can be read; forward it from "
                f"your environment instead, without writing it: {key}: {{{secrets.FROM_ENV}: {key}}}",
            )
        elif _SECRET.search(key) and value and not isinstance(value, secrets.Forwarded):
            warn(
                ("env", key),
                "looks like a secret written into the script (Slurm stores scripts, and accounting may keep them); "
                "export it in your shell before submitting instead: sbatch passes your environment on",
            )


def _setup_warnings(f: dict[str, Any], warn: Callable[[tuple[str | int, ...], str], None]) -> None:
    """Setup lines that change how the batch shell's own lines after them run (spec/setup_lines.py)."""
    from slurmgen.spec import setup_lines

    pre = f["preemption"]
    own = setup_lines.batch_trapped_signals(pre["signal"] if pre["enabled"] else None)
    user = parse_sbatch_signal(str(f["sbatch"].get("signal"))) if f["sbatch"].get("signal") else None
    if isinstance(user, tuple) and user[0] == "B":
        own.append(user[1])  # the user's own --signal=B:<sig>, which the batch shell traps to forward it
    for i, line in enumerate(f["setup"]):
        shown = line.strip().split("\n", 1)[0] + (" ..." if "\n" in line.strip() else "")
        for sig in dict.fromkeys(setup_lines.trapped_in(line)):
            if sig in own:
                message = (
                    f"`{shown}` replaces slurmgen's own trap for SIG{sig} while setup runs (bash keeps one trap per "
                    "signal): a signal then runs your trap instead of being recorded and forwarded to the step, and "
                    "slurmgen installs its own trap again after setup, so yours never runs later; remove the trap "
                    "and handle the signal in your program (cleanup: teardown)"
                )
            elif sig == "EXIT":
                message = (
                    f"`{shown}` runs when the batch shell ends, after slurmgen's own end of the run (a requeue "
                    "included), not when your program ends, and while setup runs it replaces the trap that records "
                    "a setup that ends the shell; put the cleanup in teardown instead"
                )
            else:
                message = (
                    f"`{shown}` makes the batch shell run this on SIG{sig} instead of ending, and slurmgen "
                    "does not forward it: the step never gets it; handle the signal in your program"
                )
            warn(("setup", i), message)
