"""A reader of `#SBATCH` lines that follows Slurm's own rules (src/sbatch/opt.c, _opt_batch_script and
get_argument, 22.05), so tests can read a rendered script back into the options sbatch will see.

- a directive starts at column 0 with `#SBATCH` (an indented one is only a comment);
- parsing stops at the first line whose first non-blank character is not `#`;
- arguments split on whitespace; '...' and "..." group; a backslash escapes the next character, even inside
  quotes; an unquoted `#` starts a comment; an unmatched quote is fatal;
- a line mentioning hetjob/packjob starts a new heterogeneous component (we report that as an error).
"""

from __future__ import annotations


class DirectiveError(ValueError):
    pass


def split_arguments(text: str) -> list[str]:
    args: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return args
        if text[i] == ":":
            raise DirectiveError(f"unexpected ':' in {text!r}")
        arg: list[str] = []
        started = False
        quote = ""
        escape = False
        while i < n and (quote or not text[i].isspace()):
            ch = text[i]
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
                i += 1
                continue
            elif quote:
                if ch == quote:
                    quote = ""
                    i += 1
                    continue
            elif ch in "'\"":
                quote = ch
                started = True
                i += 1
                continue
            elif ch == "#":
                if arg or started:
                    args.append("".join(arg))
                return args
            arg.append(ch)
            started = True
            i += 1
        if quote:
            raise DirectiveError(f"unmatched {quote} in {text!r}")
        if not arg and not started:
            return args
        args.append("".join(arg))


def read_directives(script: str) -> list[str]:
    """The argv sbatch builds from the script's directives (without argv[0])."""
    out: list[str] = []
    for line in script.split("\n"):
        if line.startswith("#SBATCH"):
            rest = line[len("#SBATCH") :]
        elif line.startswith("#SLURM"):
            rest = line[len("#SLURM") :]
        else:
            stripped = line.lstrip()
            if stripped and not stripped.startswith("#"):
                break
            continue
        lowered = line.lower()
        if "hetjob" in lowered or "packjob" in lowered:
            raise DirectiveError(f"line starts a heterogeneous job component: {line!r}")
        out.extend(split_arguments(rest))
    return out


def as_options(argv: list[str]) -> list[tuple[str, str | None]]:
    """`--opt=value` / `--flag` pairs, in order; anything else is an error for our scripts."""
    pairs: list[tuple[str, str | None]] = []
    for arg in argv:
        if not arg.startswith("--"):
            raise DirectiveError(f"not a long option: {arg!r}")
        name, sep, value = arg[2:].partition("=")
        pairs.append((name, value if sep else None))
    return pairs
