"""A job's log files on the cluster, copied here as they grow: one round trip brings every file's new bytes.

`logs` and `logs -f` then read the local copies as they read a local job's files (slurmgen.queries.logs), so a
remote job's logs look the same. A dropped connection loses nothing: the next look asks again from the sizes the
copies have.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from slurmgen.backends.slurm_ssh.store_trust import SG_OWN, refuse
from slurmgen.remote.transport import Transport

# stdin: "<size> <relative path>" per local copy. Out: per file with new bytes, a header line, then those bytes.
# A log directory another user made, or one others can write, is refused before a byte of it is read
# (store_trust.SG_OWN): what it holds would be shown as the job's logs and history.
_NEW_BYTES = r"""[ -d {root} ] || exit 0
for p in {root} {root}/{job}; do sg_own "$p" || exit 0; done
cd {root} 2>/dev/null || exit 0
declare -A have
while read -r n f; do have["$f"]=$n; done
find {names} -type f 2>/dev/null | while IFS= read -r f; do
  s=$(stat -c %s "$f") || continue; b=${{have["$f"]:-0}}; [ "$s" -lt "$b" ] && b=0
  [ "$s" -gt "$b" ] || continue
  printf '@@F %d %d %s\n' "$b" "$((s - b))" "$f"; tail -c +"$((b + 1))" "$f" | head -c "$((s - b))"
done
"""


def mirror(transport: Transport, remote_dir: str, prefix: str, local_dir: Path) -> int:
    """Bring the new bytes of `<remote_dir>/<prefix>.log` and everything under `<remote_dir>/<prefix>/` into
    ``local_dir`` under the same names; the number of bytes received."""
    have = []
    for path in sorted(local_dir.rglob("*")) if local_dir.is_dir() else []:
        if path.is_file():
            have.append(f"{path.stat().st_size} {path.relative_to(local_dir)}\n")
    names = " ".join(shlex.quote(n) for n in (f"./{prefix}.log", f"./{prefix}"))
    script = _NEW_BYTES.format(root=shlex.quote(remote_dir), job=shlex.quote(prefix), names=names)
    got = transport.run(SG_OWN + script, "".join(have).encode())
    refuse(transport.cluster, got.stdout[:4096].decode(errors="replace"), "none of its logs or history was read")
    data, at, received = got.stdout, 0, 0
    while at < len(data):
        end = data.index(b"\n", at)
        tag, start, length, name = data[at:end].decode(errors="surrogateescape").split(" ", 3)
        if tag != "@@F":
            break
        body = data[end + 1 : end + 1 + int(length)]
        at = end + 1 + int(length)
        target = (local_dir / name).resolve()
        if local_dir.resolve() not in target.parents:
            continue  # a name that climbs out of the copy's directory is not ours to write
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "r+b" if target.exists() else "wb") as out:
            out.seek(int(start))
            out.truncate()
            out.write(body)
        received += len(body)
    return received
