"""A job's log files on the cluster, copied here as they grow, at most ROUND_TRIP bytes per round trip.

`logs` and `logs -f` then read the local copies as they read a local job's files (slurmgen.queries.logs), so a
remote job's logs look the same. A dropped connection loses nothing: the next look asks again from the sizes the
copies have.

One round trip holds what it brings in memory several times over (ssh's output as captured by subprocess, the
frame taken off it, the slice of each file), so a 512 MiB log in one answer ended in a MemoryError under an 800 MB
limit before a byte was printed. Each answer now stops at ROUND_TRIP bytes, and the next asks again from the sizes
the copies have, as the local `logs` reads CHUNK at a time (slurmgen.queries.logs).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from slurmgen.backends.slurm_ssh.store_trust import SG_OWN, refuse
from slurmgen.remote.transport import Transport

ROUND_TRIP = 16 << 20  # bytes one answer brings at most (held a few times over while it is parsed)

# stdin: "<size> <relative path>" per local copy. Out: per file with new bytes, a header line, then those bytes,
# {limit} bytes in all at most; a file cut at the limit gets the rest on the next round trip. A log directory
# another user made, or one others can write, is refused before a byte of it is read (store_trust.SG_OWN): what it
# holds would be shown as the job's logs and history.
_NEW_BYTES = r"""[ -d {root} ] || exit 0
for p in {root} {root}/{job}; do sg_own "$p" || exit 0; done
cd {root} 2>/dev/null || exit 0
declare -A have
while read -r n f; do have["$f"]=$n; done
left={limit}
find {names} -type f 2>/dev/null | while IFS= read -r f; do
  [ "$left" -gt 0 ] || break
  s=$(stat -c %s "$f") || continue; b=${{have["$f"]:-0}}; [ "$s" -lt "$b" ] && b=0
  [ "$s" -gt "$b" ] || continue
  n=$((s - b)); [ "$n" -gt "$left" ] && n=$left; left=$((left - n))
  printf '@@F %d %d %s\n' "$b" "$n" "$f"; tail -c +"$((b + 1))" "$f" | head -c "$n"
done
"""


def mirror(transport: Transport, remote_dir: str, prefix: str, local_dir: Path, limit: int = ROUND_TRIP) -> int:
    """Bring the new bytes of `<remote_dir>/<prefix>.log` and everything under `<remote_dir>/<prefix>/` into
    ``local_dir`` under the same names, ``limit`` bytes per round trip, until an answer brings less (caught up);
    the number of bytes received."""
    received = 0
    while True:
        got = _round_trip(transport, remote_dir, prefix, local_dir, limit)
        received += got
        if got < limit:
            return received


def _round_trip(transport: Transport, remote_dir: str, prefix: str, local_dir: Path, limit: int) -> int:
    """One answer: at most ``limit`` new bytes, written into the copies; how many."""
    have = []
    for path in sorted(local_dir.rglob("*")) if local_dir.is_dir() else []:
        if path.is_file():
            # as find names it ("./x-7.log"): a key without "./" matched nothing, and every look sent every
            # file again from its first byte
            have.append(f"{path.stat().st_size} ./{path.relative_to(local_dir)}\n")
    names = " ".join(shlex.quote(n) for n in (f"./{prefix}.log", f"./{prefix}"))
    script = _NEW_BYTES.format(root=shlex.quote(remote_dir), job=shlex.quote(prefix), names=names, limit=limit)
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
