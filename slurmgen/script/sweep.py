"""A sweep in the script: which point this array task is, its values, and the words that use them.

The script works out the point's index as SLURMGEN_SWEEP_OFFSET + SLURM_ARRAY_TASK_ID (a sweep larger than the
cluster's MaxArraySize is split into arrays whose task ids start again at 0; sbatch passes each array's offset),
then a `case` sets one shell variable per parameter. Command words and env values that hold `{name}` become
bash words that expand those variables, so every value stays data: it is single-quoted where it is assigned.
"""

from __future__ import annotations

from slurmgen.script import expansion
from slurmgen.script.directives import sq
from slurmgen.script.shell_words import Shell
from slurmgen.spec.model import JobSpec


def variable(name: str) -> str:
    return f"_sg_p_{name}"


def word(text: str, spec: JobSpec) -> str:
    """One command word or env value: plain data (quoted later), or a Shell word that expands its `${NAME}`
    (slurmgen/script/expansion.py) and, in a sweep, its placeholders."""
    if spec.sweep is None:
        return expansion.word(text)
    return expansion.word(text, _filled, _filled_for_task)


def _filled(text: str, doubled: bool = False) -> str:
    """A plain piece with its placeholders as bash expansions (each `$` of a value doubled for a task that expands
    the word: it reads `$$` as `$`)."""
    from slurmgen.spec.sweep_points import split_template  # the points' module: only for a sweep

    parts = split_template(text)  # the loader already refused malformed braces
    value = "//\\$/\\$\\$" if doubled else ""
    return "".join(sq(p) if isinstance(p, str) else f'"${{{variable(p.name)}{value}}}"' for p in parts)


def _filled_for_task(text: str) -> str:
    return _filled(text, doubled=True)


def command_words(spec: JobSpec) -> list[str]:
    return [word(w, spec) for w in spec.command]


def env_words(spec: JobSpec) -> list[tuple[str, str]]:
    """(name, shell word) of each env entry: a placeholder expands, everything else is single-quoted."""
    if not spec.env:
        return []
    from slurmgen.spec.secrets import Forwarded

    out: list[tuple[str, str]] = []
    for name, value in spec.env:
        if isinstance(value, Forwarded):
            # Slurm propagates the variable itself (#SBATCH --export, secrets.py): only its name is written.
            if name != value:
                out.append((name, Shell(f'"${{{value}}}"')))
            continue
        if expansion.per_task(value):
            continue  # each task sets it (task_flags)
        w = word(value, spec)
        out.append((name, w if isinstance(w, Shell) else sq(w)))
    return out


def task_flags(spec: JobSpec) -> list[str]:
    """The task entry point's flags for the values it expands itself (a name that differs per task):
    `--expand=I,J` for command words, `--expand-env=NAME=VALUE` for env values (slurmgen/task/launch.py)."""
    flags: list[str] = []
    for name, value in spec.env:
        if type(value) is str and expansion.per_task(value):  # not a forwarded name (spec/secrets.py): text
            w = word(value, spec)
            flags.append(Shell(sq(f"--expand-env={name}=") + w) if isinstance(w, Shell) else f"--expand-env={name}={w}")
    indexes = [str(i) for i, w in enumerate(spec.command) if expansion.per_task(w)]
    if indexes:
        flags.append("--expand=" + ",".join(indexes))
    return flags


def cases(spec: JobSpec) -> list[str]:
    """`case` arms, one per point: `3) _sg_p_lr='0.1' SLURMGEN_SWEEP_PARAMS='{"lr":0.1}' ;;`."""
    sweep = spec.sweep
    if sweep is None:
        return []
    from slurmgen.spec.sweep_points import as_text

    arms = []
    for index, values in enumerate(sweep.points):
        assigned = " ".join(f"{variable(n)}={sq(as_text(v))}" for n, v in zip(sweep.params, values, strict=True))
        arms.append(f"{index}) {assigned} SLURMGEN_SWEEP_PARAMS={sq(sweep.params_json(index))} ;;")
    return arms
