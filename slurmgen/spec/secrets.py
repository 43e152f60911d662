"""Secrets in a job's environment: forwarded by name, never written.

A value written into `env:` lands in the script, which slurmgen keeps in the run directory and Slurm stores with
the job, and in what `render` and `submit --dry-run` print (NeMo Gym PR #2354 leaked `export HF_TOKEN=` that
way). `env: {HF_TOKEN: {from_env: HF_TOKEN}}` names a variable of the submitting environment instead: the
script carries only its name, on `#SBATCH --export=ALL,HF_TOKEN`, and Slurm hands the value to the job with
the rest of the environment it propagates (sbatch(1) --export; Slurm keeps a job's environment readable by its
owner and the administrators). Over ssh the value reaches sbatch's environment through ssh's stdin, never a file
or a command line on the cluster (slurmgen.backends.slurm_ssh.once). Tasks and containers get it as every other
propagated variable (pyxis passes the task environment into the container). A literal that looks like a token gets
a warning naming the field, and `render`/`--dry-run` mask it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

FROM_ENV = "from_env"
MASK = "'<secret: masked>'"

# Token formats that providers document as recognisable (prefixes chosen for secret scanning): Hugging Face,
# GitHub, OpenAI-style, AWS access key ids, Slack, GitLab, and a 40-hex key (Weights & Biases).
_TOKEN = re.compile(
    r"(?:hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{20,}"
    r"|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,}|glpat-[A-Za-z0-9_-]{20,}|[0-9a-f]{40})"
)


class Forwarded(str):
    """An env value taken from the submitting environment at submission: the text is the variable's name."""

    __slots__ = ()


def looks_like_token(value: str) -> bool:
    return not isinstance(value, Forwarded) and _TOKEN.search(value) is not None


def forwarded(env: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """(name in the job, name in the submitting environment) of each forwarded entry."""
    return [(name, str(value)) for name, value in env if isinstance(value, Forwarded)]


def missing(env: Iterable[tuple[str, str]], environ: Mapping[str, str]) -> str | None:
    """One line naming the forwarded variables that are not set here, or None."""
    absent = [f"env.{name} ({FROM_ENV}: {source})" for name, source in forwarded(env) if source not in environ]
    if not absent:
        return None
    sources = " ".join(sorted({source for _name, source in forwarded(env) if source not in environ}))
    return f"{', '.join(absent)}: not set in this environment; export {sources} before submitting"


def export_option(env: Iterable[tuple[str, str]]) -> str | None:
    """The value of `--export` that propagates every forwarded variable, or None when there is none."""
    sources = list(dict.fromkeys(source for _name, source in forwarded(env)))
    return ",".join(["ALL", *sources]) if sources else None


def mask(text: str, env: Iterable[tuple[str, str]], quote: Callable[[str], str]) -> str:
    """`text` (a rendered script) with each token-like literal env value replaced by MASK; `quote` is how the
    script quotes a value (directives.sq), so only the value's own word is replaced."""
    for _name, value in env:
        if looks_like_token(value):
            text = text.replace(quote(value), MASK)
    return text
