"""The code a remote job runs: a snapshot of the project taken at submit, stored by content on the cluster.

Taken: the files git tracks (as they are in the working tree, uncommitted changes included) and the untracked files
git does not ignore, or outside a git repository the directory's own files (slurmgen.backends.slurm_ssh.project_files
says which). Each file is stored once under
`WORKDIR/objects/<sha256>`; a snapshot is `WORKDIR/snapshots/<hash>`, the hash of its manifest (path, mode and
content hash of every file). The manifest ends each record with a NUL, the one byte no file name holds, so that no
name can add a record of its own; names with control characters are refused here in one line, and the cluster side
refuses any path that is absolute, holds `.` or `..` or an empty part, before it copies a file. Only objects the
cluster lacks are sent, so an unchanged project sends no file content. A snapshot is built in a temporary directory
and renamed into place (rename(2) is atomic), then made read-only: a broken upload leaves no snapshot behind, and a
requeued run finds the code it was submitted with.
Whatever the login node's umask, the store's directories are 0700, each object 0400, and a stored file keeps the
read and execute bits it has here (a 0600 file is 0400, not 0444).
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from slurmgen.backends.slurm_ssh.project_files import Selection, git, list_files, select
from slurmgen.backends.slurm_ssh.store_trust import SG_OWN, refuse, resolve_line, store_check
from slurmgen.errors import SlurmgenError
from slurmgen.remote.transport import Transport

MB = 1_000_000
READ_EXECUTE = 0o555  # what a stored file keeps of its mode: no write bit, and no read bit it did not have
COMPLETE = "complete"  # a snapshot's marker, written last: its files are all there and each hashed to its name


class SnapshotError(SlurmgenError):
    """The project cannot be snapshotted or stored (not a git repository, too large, the cluster's disk full)."""


@dataclass(frozen=True)
class SnapshotFile:
    path: str  # relative to the repository's top
    digest: str  # sha256 of the content
    size: int
    mode: int  # its read and execute bits (0o555 of st_mode): stored read-only, as private as it is here

    @property
    def executable(self) -> bool:
        return bool(self.mode & 0o111)


@dataclass(frozen=True)
class Snapshot:
    root: Path
    files: tuple[SnapshotFile, ...]
    commit: str | None  # HEAD, or None before the first commit
    dirty: bool  # uncommitted changes or untracked files went in
    note: str | None = None  # the line saying it was not taken from git (not a git repository)
    left_out: tuple[str, ...] = ()  # one line per directory left out because it is read through a link

    @property
    def manifest(self) -> bytes:
        """`<sha256> <mode> <path>` then NUL, per file (the mode: four octal digits, the file's read and execute
        bits here); the path's bytes as they are (git's own -z form)."""
        return b"".join(
            f"{f.digest} {f.mode:04o} ".encode() + f.path.encode(errors="surrogateescape") + b"\0" for f in self.files
        )

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.manifest).hexdigest()

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def control_character(name: str) -> bool:
    """Whether a file name holds a control character (C0, DEL or C1): a name no manifest line or log should carry."""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in name)


def take_snapshot(directory: Path, limit_mb: int = 100, not_code: tuple[str, ...] = ()) -> Snapshot:
    """The snapshot of the project around ``directory``; SnapshotError in one line when it cannot be. ``not_code``:
    the spec's output and state directories (relative to ``directory``), left out when inside the project."""
    listed = list_files(directory)
    root = listed.root
    chosen = select(root, listed.names, directory, not_code)
    files: list[SnapshotFile] = []
    for name in chosen.names:
        if control_character(name):
            raise SnapshotError(
                f"{root}: the file {name!r} has a control character in its name, which no cluster-side copy can "
                "carry safely; rename it (git mv), or add it to .gitignore"
            )
        path = root / name
        try:
            info = os.lstat(path)
        except FileNotFoundError:  # tracked, deleted in the working tree: the job must not see it either
            continue
        if not path.is_file() or path.is_symlink():
            continue  # links and submodules are not copied: a link may point off the project
        data = path.read_bytes()
        files.append(SnapshotFile(name, hashlib.sha256(data).hexdigest(), len(data), info.st_mode & READ_EXECUTE))
    if listed.git:
        commit = git(root, "rev-parse", "--verify", "-q", "HEAD")
        head = commit.stdout.decode().strip() or None
        snap = Snapshot(root, tuple(files), head, _dirty(root, chosen), left_out=chosen.notes)
    else:
        snap = Snapshot(root, tuple(files), None, False, listed.note, chosen.notes)
    if snap.size > limit_mb * MB:
        largest = sorted(files, key=lambda f: f.size, reverse=True)[:3]
        named = ", ".join(f"{f.path} ({f.size / MB:.1f} MB)" for f in largest)
        raise SnapshotError(
            f"{root}: the snapshot is {snap.size / MB:.1f} MB, over the limit of {limit_mb} MB; largest: {named}; "
            "add them to .gitignore (data belongs on the cluster), raise the profile's snapshot_limit_mb, "
            "or use --no-snapshot"
        )
    return snap


def _dirty(root: Path, chosen: Selection) -> bool:
    """Whether a change git sees went in: what was left out as not code (a journal, logs) is not one."""
    status = git(root, "status", "--porcelain", "-z", "--untracked-files=all")
    entries = status.stdout.decode(errors="surrogateescape").split("\0")
    skip = False
    for entry in entries:
        if skip or len(entry) < 4:
            skip = False
            continue
        skip = entry[0] in "RC"  # a rename's or copy's next entry is its old name
        if entry[3:] not in chosen.dropped:
            return True
    return False


def package_snapshot() -> Snapshot:
    """slurmgen's own modules, as this process runs them: shipped beside the job's code so that the batch helper
    and the task supervisor in the job are the version that rendered its script (both are standard library only,
    so nothing needs installing on the cluster). Stored by content like any snapshot: a version ships once."""
    package = Path(__file__).resolve().parents[2]  # slurmgen/, from slurmgen/backends/slurm_ssh/snapshot.py
    files = []
    for path in sorted(package.rglob("*")):
        if path.suffix not in (".py", ".typed") or "__pycache__" in path.parts or not path.is_file():
            continue
        data = path.read_bytes()
        name = str(path.relative_to(package.parent))
        files.append(SnapshotFile(name, hashlib.sha256(data).hexdigest(), len(data), 0o444))
    return Snapshot(package.parent, tuple(files), None, False)


@dataclass(frozen=True)
class Upload:
    path: str  # the snapshot's directory on the cluster
    files_sent: int
    bytes_sent: int  # file content sent: 0 when the cluster had every file


# Which objects the cluster lacks (stdin: one digest per line); prints `have` when the snapshot exists already (the
# user's own, complete). An object counts as present only when its bytes hash to its name: one that does not is sent
# again and replaces it. The script starts with the store's checks (store_trust: SG_OWN, `w`, store_check).
_MISSING = """set -u
umask 077
if [ -f "$w/snapshots/{h}/complete" ] && sg_own "$w/snapshots/{h}" >/dev/null; then echo have; exit 0; fi
mkdir -p "$w/objects" "$w/snapshots" && chmod 700 "$w/objects" "$w/snapshots" || exit 3
while read -r d; do
  [ -f "$w/objects/$d" ] && [ "$(sha256sum < "$w/objects/$d" | cut -d' ' -f1)" = "$d" ] || echo "$d"
done
"""

# Store the sent objects (each checked against its name), then build the snapshot beside its final place and rename
# it there. The tar holds the objects and MANIFEST (digest, mode, path, then NUL, per file: bash's `read -d ''`
# reads up to a NUL, and IFS= keeps a name's leading and trailing blanks). A path is copied only when it is plain
# and relative: "/$p/" with `//`, `/./` or `/../` in it is an absolute path, an empty part, `.` or `..` (path
# resolution, path_resolution(7)), which could write outside the snapshot (over its manifest, or ~/.ssh). Any
# failure removes what it made.
_STORE = """set -u
umask 077
h={h}; i="$w/objects/.in.$$"; t="$w/snapshots/.tmp.$h.$$"; declare -A new
fail() {{
  chmod -R u+w "$t" 2>/dev/null; rm -rf "$i" "$i.manifest" "$t"
  echo "error: $1; $(df -Pk "$w" 2>/dev/null | awk 'NR==2 {{print $4}}') KB free there"; exit 4
}}
mkdir -p "$i" || fail "cannot make $i"
# Errors are kept in memory, not in a file: on a full disk a file of them would be empty.
command -v tar >/dev/null || fail "tar is not on the login node's PATH (ask its admins for GNU tar)"
e=$(tar -x -C "$i" 2>&1 >/dev/null) || fail "unpacking: $(printf '%s' "$e" | head -1)"
mv "$i/MANIFEST" "$i.manifest" || fail "no manifest arrived"
for f in "$i"/*; do
  [ -e "$f" ] || continue
  d=$(sha256sum "$f" | cut -d' ' -f1); [ "$d" = "${{f##*/}}" ] || fail "object ${{f##*/}} arrived damaged"
  chmod 400 "$f" && mv -f "$f" "$w/objects/$d" || fail "storing object $d"; new[$d]=1
done
rmdir "$i"; mkdir -p "$t/files" || fail "cannot make $t"
mv "$i.manifest" "$t/manifest"
while IFS= read -r -d '' r; do
  d=${{r%% *}}; r=${{r#* }}; m=${{r%% *}}; p=${{r#* }}; q=$(printf '%q' "$p")
  case "$d" in [0-9a-f]*[0-9a-f]) ;; *) fail "the manifest names a bad object for $q";; esac
  case "$d" in *[!0-9a-f]*) fail "the manifest names a bad object for $q";; esac
  case "$m" in [0-7][0-7][0-7][0-7]) ;; *) fail "the manifest names a bad mode for $q";; esac
  case "/$p/" in *//*|*/./*|*/../*) fail "refusing the path $q: not a plain relative path";; esac
  case "$p" in */*) mkdir -p "$t/files/${{p%/*}}" || fail "cannot make a directory for $q";; esac
  e=$(cp "$w/objects/$d" "$t/files/$p" 2>&1) || fail "copying $q: $(printf '%s' "$e" | tail -1)"
  # an object not stored by this call is used only when its bytes (as copied) hash to its name
  [ -n "${{new[$d]:-}}" ] || [ "$(sha256sum < "$t/files/$p" | cut -d' ' -f1)" = "$d" ] ||
    fail "object $d in the store does not hash to its name; remove $w/objects/$d and submit again"
  chmod "$m" "$t/files/$p" || fail "setting the mode of $q"
done < "$t/manifest"
chmod -R a-w "$t/files"
: > "$t/complete" || fail "marking the snapshot complete"
# An incomplete snapshot of the user's own (an older slurmgen's, without the marker) is replaced.
if [ -d "$w/snapshots/$h" ] && [ ! -f "$w/snapshots/$h/complete" ] && sg_own "$w/snapshots/$h" >/dev/null; then
  chmod -R u+w "$w/snapshots/$h"; rm -rf "$w/snapshots/$h"
fi
# A parallel submit of the same tree may have renamed its copy first: the same content, keep that one.
if ! mv -T "$t" "$w/snapshots/$h" 2>/dev/null; then
  [ -f "$w/snapshots/$h/complete" ] && sg_own "$w/snapshots/$h" >/dev/null || fail "renaming the snapshot"
  chmod -R u+w "$t"; rm -rf "$t"
fi
echo stored
"""


def _check(result_code: int, out: bytes, cluster: str, what: str) -> str:
    text = out.decode(errors="replace").strip()
    if result_code != 0:
        said = text.splitlines()[-1] if text else f"status {result_code}"
        raise SnapshotError(
            f"cluster {cluster}: {what} failed ({said}); nothing was submitted; free space in the profile's workdir "
            "if the disk is full, then submit again"
        )
    return text


def snapshot_path(workdir: str, snap: Snapshot) -> str:
    """Where a stored snapshot's files are on the cluster."""
    return f"{workdir}/snapshots/{snap.digest}/files"


def upload(snap: Snapshot, transport: Transport, workdir: str) -> Upload:
    """Send what the cluster lacks and build the snapshot there; the snapshot's path on the cluster."""
    cluster = transport.cluster
    h = snap.digest
    final = snapshot_path(workdir, snap)
    start = SG_OWN + resolve_line(workdir) + store_check()
    wanted = "".join(f"{d}\n" for d in sorted({f.digest for f in snap.files})).encode()
    asked = transport.run(start + _MISSING.format(h=h), wanted)
    refuse(cluster, asked.stdout.decode(errors="replace"))
    text = _check(asked.returncode, asked.stdout, cluster, "looking up the snapshot")
    if text == "have":
        return Upload(final, 0, 0)
    missing = set(text.split())
    buffer = io.BytesIO()
    sent = 0
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for digest in sorted(missing):
            source = next(f for f in snap.files if f.digest == digest)
            data = (snap.root / source.path).read_bytes()
            if hashlib.sha256(data).hexdigest() != digest:
                raise SnapshotError(f"{source.path}: changed while the snapshot was taken; submit again")
            _add(tar, digest, data)
            sent += len(data)
        _add(tar, "MANIFEST", snap.manifest)
    stored = transport.run(start + _STORE.format(h=h), buffer.getvalue(), timeout=3600)
    refuse(cluster, stored.stdout.decode(errors="replace"))
    _check(stored.returncode, stored.stdout, cluster, "storing the snapshot")
    return Upload(final, len(missing), sent)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o400
    tar.addfile(info, io.BytesIO(data))
