"""Slurm hostlist expressions, expanded in pure Python (no ``scontrol`` inside containers).

Grammar, from Slurm's ``src/common/hostlist.c`` (``hostlist_create``, ``_parse_single_range``,
``_push_range_list``):

- tokens are separated by ``,``, space, tab or newline; a comma inside brackets does not split;
- a token is literal text and bracket groups, ``rack[1-2]-n[01-02]``. The *last* group varies fastest; the
  groups before it vary in reverse order, because ``_push_range_list`` peels the last group off the prefix
  and recurses into the rest: ``x[0-1]y[5-6]z[7-8]`` gives ``x0y5z7 x0y5z8 x1y5z7 x1y5z8 x0y6z7 ...``
  (checked against ``scontrol show hostnames``). With two groups this is plain left-to-right order;
- a group holds comma-separated ``lo-hi`` ranges or single numbers; the width is ``len(lo)``, so
  ``n[01-2]`` gives ``n01 n02`` and ``n[1-02]`` gives ``n1 n2``;
- text after the last bracket (``node[1-2]-ib``) is kept, as Slurm does since 23.11 (commit 0994b5f198);
- order and duplicates are kept (``hostlist_create`` neither sorts nor deduplicates);
- decreasing or negative ranges, empty brackets, unbalanced brackets and absurd sizes are errors. ``scontrol``
  prints "Invalid hostlist" and exits 0 for those; we raise instead, so a bad list never becomes an empty
  ``MASTER_ADDR``.

Never a regex on the whole expression: Lightning's regex resolves ``node[1-2]-ib[0-1]`` to ``node1``.
"""

from __future__ import annotations

from slurmgen.errors import RuntimeSetupError

# Slurm caps one range and one prefix at 64 K names (MAX_RANGE, MAX_PREFIX_CNT); we cap the whole expression.
MAX_HOSTS = 64 * 1024
_SEPARATORS = ", \t\n"


class HostlistError(RuntimeSetupError, ValueError):
    """A malformed hostlist expression. The message quotes the expression and says what is wrong."""

    def __init__(self, expr: str, problem: str) -> None:
        self.expr = expr
        self.problem = problem
        shown = expr if len(expr) <= 200 else f"{expr[:200]}... ({len(expr)} characters)"
        super().__init__(f"invalid hostlist {shown!r}: {problem}")


MAX_DIGITS = 18  # a node number; Slurm's own hostlist parser reads it into an unsigned long (src/common/hostlist.c)


def expand_hostlist(expr: str, max_hosts: int = MAX_HOSTS) -> list[str]:
    """Expand a Slurm hostlist expression into host names, in order, duplicates kept.

    >>> expand_hostlist("gpu-[01-03,07],cpu[1-2]")
    ['gpu-01', 'gpu-02', 'gpu-03', 'gpu-07', 'cpu1', 'cpu2']

    An empty (or all-separator) expression gives an empty list; a malformed one raises HostlistError.
    """
    hosts: list[str] = []
    for token in _tokens(expr):
        pieces = _parse_token(expr, token)
        count = 1
        for piece in pieces:
            if isinstance(piece, list):
                count *= len(piece)
        if len(hosts) + count > max_hosts:
            raise HostlistError(expr, f"more than {max_hosts} hosts")
        hosts.extend(_combine(pieces))
    return hosts


def _combine(pieces: list[str | list[str]]) -> list[str]:
    """All names of one token, in Slurm's order (see the module docstring)."""
    groups = [i for i, piece in enumerate(pieces) if not isinstance(piece, str)]
    if len(groups) <= 2:  # plain left-to-right order; the common case, and fast for 64 K names
        names = [""]
        for piece in pieces:
            names = [n + piece for n in names] if isinstance(piece, str) else [n + x for n in names for x in piece]
        return names
    order = groups[-2::-1] + groups[-1:]  # slowest first: earlier groups last to first, then the last group
    choices: list[dict[int, str]] = [{}]
    for index in order:
        choices = [{**chosen, index: number} for chosen in choices for number in pieces[index]]
    return ["".join(p if isinstance(p, str) else chosen[i] for i, p in enumerate(pieces)) for chosen in choices]


def _tokens(expr: str) -> list[str]:
    tokens: list[str] = []
    current: list[str] = []
    depth = 0
    for char in expr:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if depth == 0 and char in _SEPARATORS:
            if current:
                tokens.append("".join(current))
            current = []
        else:
            current.append(char)
    if current:
        tokens.append("".join(current))
    return tokens


def _parse_token(expr: str, token: str) -> list[str | list[str]]:
    """Split a token into literal text (str) and expanded bracket groups (list of numbers as text)."""
    pieces: list[str | list[str]] = []
    rest = token
    while rest:
        open_at = rest.find("[")
        close_at = rest.find("]")
        if close_at != -1 and (open_at == -1 or close_at < open_at):
            raise HostlistError(expr, f"']' without '[' in {token!r}")
        if open_at == -1:
            pieces.append(rest)
            break
        if open_at:
            pieces.append(rest[:open_at])
        end = rest.find("]", open_at)
        if end == -1:
            raise HostlistError(expr, f"missing ']' in {token!r}")
        body = rest[open_at + 1 : end]
        if "[" in body:
            raise HostlistError(expr, f"nested '[' in {token!r}")
        pieces.append(_expand_group(expr, body))
        rest = rest[end + 1 :]
    return pieces


def _expand_group(expr: str, body: str) -> list[str]:
    if not body:
        raise HostlistError(expr, "empty brackets '[]'")
    numbers: list[str] = []
    for item in body.split(","):
        lo, dash, hi = item.partition("-")
        if not dash:
            hi = lo
        if not (lo.isdigit() and lo.isascii()) or not (hi.isdigit() and hi.isascii()):
            raise HostlistError(expr, f"bad range {item[:40]!r} in '[{body[:40]}]' (want N or LO-HI, digits only)")
        if max(len(lo), len(hi)) > MAX_DIGITS:  # int() refuses 4,300 digits with a bare ValueError (CPython's limit)
            raise HostlistError(expr, f"a host number longer than {MAX_DIGITS} digits in '[{body[:40]}...]'")
        low, high = int(lo), int(hi)
        if low > high:
            raise HostlistError(expr, f"decreasing range {item!r} in '[{body}]'")
        if high - low >= MAX_HOSTS or len(numbers) + high - low >= MAX_HOSTS:
            raise HostlistError(expr, f"too many hosts in range '[{body}]' (at most {MAX_HOSTS})")
        width = len(lo)
        numbers.extend(str(n).zfill(width) for n in range(low, high + 1))
    return numbers
