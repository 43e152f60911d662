"""What slurmgen takes as a cluster's `host`: one ssh destination word, and nothing a shell or ssh would read as
more.

ssh(1) takes the destination as `[user@]hostname` or `ssh://[user@]hostname[:port]`, and an ssh_config(5) `Host`
alias is a word too. A word that starts with `-` is an option to ssh (`-oProxyCommand=...` runs a command of its
author's), and a word with blanks, control characters or shell syntax (`;`, `$`, backquotes) is more than one word
when the advice that names it (run `ssh HOST`) is pasted into a shell. So the host is checked once, where the
profile is read, and the transport refuses one it did not check; every line of advice names only a checked host.
Standard library only: the spec and the transport both use it.
"""

from __future__ import annotations

import re

# Letters, digits and what hostnames, user names, IPv6 literals ([::1]), ports and ssh:// URIs use.
_WORD = re.compile(r"[A-Za-z0-9._@:%+\[\]/-]+")

RULE = (
    "must be one ssh destination word (an alias, host, user@host or ssh://user@host:port): letters, digits and "
    ". _ - @ : % + [ ] /, not starting with -"
)


def is_destination(host: object) -> bool:
    """Whether ``host`` is one ssh destination word (see RULE)."""
    return isinstance(host, str) and _WORD.fullmatch(host) is not None and not host.startswith("-")
