"""Spec to script text: the Jinja environment, its filters, and the context computed from the spec.

Jinja runs sandboxed, with StrictUndefined (a missing variable is an error, not an empty string), autoescape off
(HTML escaping is wrong for bash) and a finalize hook that refuses None. Decisions are made in Python
(slurmgen.script.directives, slurmgen.script.step); the template only lays them out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slurmgen import contract, python_floor
from slurmgen.errors import SlurmgenError, UsageError
from slurmgen.exit_codes import EXIT_INVALID, NODES_REQUEUED, NODES_SHORT
from slurmgen.interruption.hold import STEP_GRACE, hold_limit  # the hold window is an interruption decision
from slurmgen.job_context.values import KEY_SHELL
from slurmgen.script.directives import directives, sq, task_log_stem
from slurmgen.script.shell_words import join
from slurmgen.script.step import batch_words, container_context, package_dir_words, rendezvous_words, step_line
from slurmgen.script.sweep import cases, env_words
from slurmgen.signal_names import parse_sbatch_signal
from slurmgen.spec.model import JobSpec, node_checks
from slurmgen.spec.setup_lines import batch_trapped_signals

TEMPLATE = "sbatch.sh.j2"


class TemplateError(SlurmgenError):
    """A template (ours or the user's) failed to load or render; the message names the template and line.

    Bad input (exit 2): the shipped template is tested, so in practice this is a `--templates` file."""

    exit_code = EXIT_INVALID


def builtin_templates() -> Path:
    """The templates shipped in the wheel, or the repository's top-level templates/ in a source checkout."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "templates"
    return packaged if packaged.is_dir() else package.parent / "templates"


def contract_exports(spec: JobSpec) -> list[tuple[str, str]]:
    """The contract's exported variables (slurmgen.contract.variables(), in its order) with their values for
    ``spec``: each row's spec value, left out where its gate is off or its `omit` rule says so."""
    out: list[tuple[str, str]] = []
    for row in contract.variables():
        if row.set_by != contract.FROM_SPEC or (row.when and not _spec_value(spec, row.when)):
            continue
        value = _spec_value(spec, row.spec)
        if (
            (row.omit == contract.OMIT_NONE and value is None)
            or (row.omit == contract.OMIT_EMPTY and not value)
            or (row.omit == contract.OMIT_DEFAULT and value == row.default)
        ):
            continue
        out.append((row.name, _export_text(value)))
    return out


def _spec_value(spec: JobSpec, path: str) -> Any:
    """The value at a dotted path of attributes of the spec (``distributed.port``)."""
    value: Any = spec
    for part in path.split("."):
        if value is None:  # a section left out (progress:): each of its fields is None
            return None
        value = getattr(value, part)
    return value


def _export_text(value: Any) -> str:
    """An exported value as the runtime parses it: a flag (or an object, such as a container) as 1, a list as one
    shell-quoted command line, a mapping (its pairs) as shell-quoted NAME=value words, anything else as text."""
    if isinstance(value, bool) or not isinstance(value, str | int | tuple):
        return "1"
    if isinstance(value, tuple) and value and all(isinstance(item, tuple) for item in value):
        return join([f"{name}={text}" for name, text in value])
    return join(list(value)) if isinstance(value, tuple) else str(value)


def context(spec: JobSpec) -> dict[str, Any]:
    pre = spec.preemption
    exports = contract_exports(spec)
    # Python buffers a pipe in 8 KiB blocks, so logs would lag far behind the job; `env` may override this.
    exports.append(("PYTHONUNBUFFERED", "1"))
    trapped = batch_trapped_signals(pre.signal if pre.enabled else None)  # setup lines must not replace them
    own = user_batch_signal(spec)
    if own is not None and own not in trapped:
        trapped.insert(0, own)  # the user's own --signal=B:<sig> (preemption off): forwarded to the step
    return {
        "name": spec.name,
        "digest": spec.digest,
        "directives": [d.line() for d in directives(spec)],
        "trapped_signals": trapped,
        # srun kills the tasks at once on SIGTERM (src/srun/libsrun/srun_job.c, _srun_signal_mgr: "forcing job
        # termination"): the batch helper delivers it to the step through scancel instead.
        "helped_signals": ([pre.signal] if pre.enabled else []) + [contract.SAVE_EXIT_SIGNAL],
        "exports": exports,
        "log_dir": task_log_stem(spec),
        "state_dir": pre.state_dir,
        "env": list(spec.env),  # kept for user templates; ours uses env_words (a sweep's placeholders expand)
        "env_words": env_words(spec),
        "sweep": spec.sweep is not None,
        "sweep_cases": cases(spec),
        "sweep_id": spec.name,
        "setup": list(spec.setup),  # kept for user templates; ours uses setup_items
        "setup_items": setup_items(spec.setup),
        "setup_shown": [sq(shown) for _, _, shown in setup_items(spec.setup)],
        "setup_fail_fast": spec.setup_fail_fast,
        "teardown": [(number, text) for number, text, _ in setup_items(spec.teardown)],
        "batch_setup_failed": join(batch_words(spec, "setup-failed")),
        "python": spec.python,
        "rendezvous": join(rendezvous_words(spec)),
        "package_dir": join(package_dir_words(spec)),
        "container": spec.container is not None,
        **container_context(spec),
        "step": step_line(spec),
        "preemption": pre.enabled,
        "preempt_signal": pre.signal,
        "grace": STEP_GRACE,
        "hold_limit": hold_limit(pre.lead_time) if pre.enabled else STEP_GRACE,
        "ready_dir": contract.READY_DIR,
        "job_key_shell": KEY_SHELL,  # the job-key rule, written once (slurmgen/job_context/values.py)
        "step_tasks": spec.nodes * spec.tasks_per_node,
        "marker_suffix": contract.REQUEUE_MARKER_SUFFIX,
        "wandb": spec.trackers.wandb,
        "batch_begin": join(batch_words(spec, "begin")),
        "python_refused": python_floor.REFUSED,
        "batch_signal": join(batch_words(spec, "signal")),
        "batch_restart": join(batch_words(spec, "restart")),
        "batch_before": join(batch_words(spec, "before")),
        "node_checks": node_checks(spec),
        "nodes_requeued": NODES_REQUEUED,
        "nodes_short": NODES_SHORT,
        "batch_nodes": join([spec.python, "-m", "slurmgen.batch.nodes", str(spec.nodes), str(spec.gpus_per_node)]),
        "batch_end": join(batch_words(spec, "end")),
        "steps": spec.steps,
        "batch_steps": join(batch_words(spec, "steps")),
        "batch_step_done": join(batch_words(spec, "step-done")),
        "batch_watch": join(batch_words(spec, "watch")),
        "signals_file": contract.BATCH_SIGNALS_FILE,
    }


def setup_items(items: tuple[str, ...]) -> list[tuple[int, str, str]]:
    """Each setup or teardown item as the script holds it: its number (as validate names it, setup[N]), its text
    as written (a block without the line break YAML keeps at its end), and how the batch log names it: the line,
    or a block's first line and `...`."""
    out = []
    for number, item in enumerate(items):
        text = item.rstrip("\n")
        first = text.strip().split("\n", 1)[0]
        out.append((number, text, f"{first} ..." if "\n" in text.strip() else first))
    return out


def user_batch_signal(spec: JobSpec) -> str | None:
    """The signal of the user's own `sbatch: {signal: B:...}` (allowed with preemption off) that reaches the batch
    shell, which must trap it: bash's default action for most signals is to end the shell, and the job with it."""
    value = dict(spec.sbatch).get("signal")
    parsed = parse_sbatch_signal(value) if value else None
    return parsed[1] if isinstance(parsed, tuple) and parsed[0] == "B" else None


def _finalize(value: Any) -> Any:
    if value is None:
        raise TemplateError("a template printed None; every value in a script must be defined")
    return value


def environment(user_dir: str | Path | None = None) -> Any:
    import jinja2  # imported here: the runtime and the fast paths never pay for it
    from jinja2.sandbox import SandboxedEnvironment

    search = [str(builtin_templates())]
    if user_dir is not None:
        user = Path(user_dir)
        if not user.is_dir():
            raise UsageError(f"--templates {user_dir}: not a directory")
        search.insert(0, str(user))
    env = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        finalize=_finalize,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = sq
    return env


def _failing_line(exc: BaseException) -> str:
    """`file:line` of the template line that raised: Jinja rewrites the traceback so that its frames are the
    template's own lines (jinja2/debug.py, rewrite_traceback_stack)."""
    where = TEMPLATE
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.endswith(".j2"):
            where = f"{filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def render(spec: JobSpec, templates: str | Path | None = None) -> str:
    """The batch script for a spec. Raises TemplateError with the template's name and line on failure."""
    import jinja2

    env = environment(templates)
    try:
        text: str = env.get_template(TEMPLATE).render(context(spec))
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"{exc.filename or exc.name}:{exc.lineno}: template syntax: {exc.message}") from None
    except jinja2.TemplateNotFound as exc:
        where = _failing_line(exc)
        raise TemplateError(f"{where}: template {exc.name} not found in {templates or builtin_templates()}") from None
    except jinja2.TemplateError as exc:  # undefined variables, sandbox refusals
        raise TemplateError(f"{_failing_line(exc)}: {exc.message or type(exc).__name__}") from None
    except TemplateError:
        raise
    except Exception as exc:  # a user's template is code: `{{ 1 + "a" }}` raises TypeError while rendering
        raise TemplateError(f"{_failing_line(exc)}: {type(exc).__name__}: {exc}") from None
    if not text.startswith("#!"):
        raise TemplateError(f"{TEMPLATE}: the script must start with #! (sbatch refuses it otherwise)")
    if "\r" in text or "\0" in text:
        raise TemplateError(f"{TEMPLATE}: the script contains CR or NUL, which sbatch refuses")
    return text
