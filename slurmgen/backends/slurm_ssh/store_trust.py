"""The trust rule (slurmgen/trust.py) on the cluster's side of a remote job, as shell for the login node.

What slurmgen reads back there and acts on is the profile's `workdir`: its `objects/` (file contents by hash),
`snapshots/` (the code a job starts in, and slurmgen's own modules, first on the job's PYTHONPATH), `runs/` (the
script `resume` submits again) and the log directory (what `logs` and `history` print). In a shared scratch another
user may have made any of them first, so the remote scripts call `sg_own` on each before they read or write: the
path must be the user's own (`id -u`), not a symbolic link, and not writable by group or others. The workdir itself
may be writable by others when it is sticky (a scratch directory of the user's own with mode 1777): others can then
create new names in it but not rename or remove the user's (rename(2), unlink(2) on a sticky directory), and every
name slurmgen reads there (`objects`, `snapshots`, `runs`) is checked on its own, so a planted one is refused, never
used. Inside the store the sticky bit is no excuse: a planted `objects/<hash>` or `snapshots/<hash>` is a new name.
A refusal is one line naming the path, its owner or mode, and the fix.

`workdir: ~/x` and a relative workdir are read in the user's home on the cluster (`$HOME`, as the ssh command's
shell has it, not this machine's): `remote_workdir` writes the shell word, the survey prints what it became, and
everything after it uses that absolute path.
"""

from __future__ import annotations

import shlex

from slurmgen.errors import UsageError

REFUSED = "@@slurmgen-refused "

# $1: a path that, where it exists, must be this user's own and not writable by group or others ($2 = sticky: unless
# it is sticky). Prints one line (prefixed with REFUSED) and fails otherwise. stat(1) -c: %u owner's uid, %a the
# mode in octal (GNU coreutils).
SG_OWN = rf"""sg_own() {{
  sticky=${{2-}}
  if [ -L "$1" ]; then
    echo "{REFUSED}$1 is a symbolic link; slurmgen stores and reads only real directories of your own: remove it" \
      "or set the profile's workdir to a directory of your own"; return 1
  fi
  [ -e "$1" ] || return 0
  set -- "$1" $(stat -c '%u %a' -- "$1") "$(id -u)"
  if [ "$2" != "$4" ]; then
    echo "{REFUSED}$1 is owned by uid $2, not by you (uid $4): another user made it first; set the profile's" \
      "workdir to a directory of your own (e.g. ~/.slurmgen)"; return 1
  fi
  if [ $((0$3 & 022)) -ne 0 ] && ! {{ [ "$sticky" = sticky ] && [ $((0$3 & 01000)) -ne 0 ]; }}; then
    echo "{REFUSED}$1 has mode $3: group or others can write it, and plant code that your jobs run;" \
      "chmod go-w '$1' (a team's directory: shared_workdir: true in the profile)"; return 1
  fi
}}
"""


def remote_workdir(workdir: str) -> str:
    """The shell word of the profile's ``workdir`` on the cluster: `~` and `~/x` in the remote home, a relative
    path relative to it (the directory an ssh command starts in), an absolute path as written. Pure."""
    if workdir == "~":
        return '"$HOME"'
    if workdir.startswith("~/"):
        return '"$HOME"/' + shlex.quote(workdir[2:])
    if workdir.startswith("~"):
        raise UsageError(f"workdir: {workdir}: another user's home (~name) is not supported; write ~/... or an "
                         "absolute path")  # fmt: skip
    if workdir.startswith("/"):
        return shlex.quote(workdir)
    return '"$HOME"/' + shlex.quote(workdir)


# A team's shared workdir (profile field shared_workdir): each user's files go in `<workdir>/<user name>`, which
# sg_own then checks like any workdir. The team's directory itself may be group-writable only when sticky: without
# the sticky bit a member may rename another's directory away and put one of their own in its place (rename(2):
# in a sticky directory only the owner of an entry may rename it).
SG_TEAM = rf"""if [ -L "$w" ]; then
  echo "{REFUSED}$w is a symbolic link: set the profile's workdir to the team's real directory"; exit 0
fi
if [ -d "$w" ]; then
  m=$(stat -c %a -- "$w")
  if [ $((0$m & 022)) -ne 0 ] && [ $((0$m & 01000)) -eq 0 ]; then
    echo "{REFUSED}$w has mode $m: a team's shared workdir that the group can write must be sticky, or a member" \
      "can replace another's directory in it; chmod +t '$w'"; exit 0
  fi
fi
w="$w/$(id -un)"
"""


def resolve_line(workdir: str, shared: bool = False) -> str:
    """Shell that sets `w` to the absolute workdir, refusing a home that is not absolute; ``shared``: the user's
    own directory in a team's workdir (SG_TEAM)."""
    word = remote_workdir(workdir)
    check = "" if word.startswith("'") or not word.startswith('"$HOME"') else (
        f'case "$HOME" in /*) ;; *) echo "{REFUSED}the cluster\'s HOME ($HOME) is not an absolute path, so '
        f'workdir {workdir} cannot be placed in it: write an absolute workdir in the profile"; exit 0;; esac\n'
    )  # fmt: skip
    return f"{check}w={word}\n" + (SG_TEAM if shared else "")


def store_check(names: tuple[str, ...] = ("/objects", "/snapshots", "/runs")) -> str:
    """Shell checking the workdir `$w` (which may be sticky) and its store's directories (which may not) with
    sg_own, exiting 0 after the refusal line."""
    paths = " ".join(f'"$w"{n}' for n in names)
    return f'sg_own "$w" sticky || exit 0\nfor p in {paths}; do sg_own "$p" || exit 0; done\n'


def refusal(text: str) -> str | None:
    """The refusal line a remote script printed, if any: its first line (the checks run before anything else is
    printed, so a file's own text is never read as one). Pure."""
    first = text.lstrip("\n").split("\n", 1)[0]
    return first[len(REFUSED) :] if first.startswith(REFUSED) else None


def refuse(cluster: str, text: str, outcome: str = "nothing was submitted") -> None:
    """Raise the one line of a refusal in ``text`` (a remote script's output), naming the cluster."""
    said = refusal(text)
    if said is not None:
        raise UsageError(f"cluster {cluster}: {said}; {outcome}")
