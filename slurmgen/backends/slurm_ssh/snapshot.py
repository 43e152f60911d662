"""The code a remote job runs: a snapshot of the project taken at submit, stored by content on the cluster.

Taken: the files git tracks (as they are in the working tree, uncommitted changes included) and the untracked files
git does not ignore, or outside a git repository the directory's own files (slurmgen.backends.slurm_ssh.project_files
says which). Each file is stored once under
`WORKDIR/objects/<sha256>`; a snapshot is `WORKDIR/snapshots/<hash>`, the hash of its manifest (path, mode and
content hash of every file). Only objects the cluster lacks are sent, so an unchanged project sends no file
content. A snapshot is built in a temporary directory and renamed into place (rename(2) is atomic), then made
read-only: a broken upload leaves no snapshot behind, and a requeued run finds the code it was submitted with.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from slurmgen.backends.slurm_ssh.project_files import git, list_files
from slurmgen.backends.slurm_ssh.store_trust import SG_OWN, refuse, resolve_line, store_check
from slurmgen.errors import SlurmgenError
from slurmgen.remote.transport import Transport

MB = 1_000_000
COMPLETE = "complete"  # a snapshot's marker, written last: its files are all there and each hashed to its name


class SnapshotError(SlurmgenError):
    """The project cannot be snapshotted or stored (not a git repository, too large, the cluster's disk full)."""


@dataclass(frozen=True)
class SnapshotFile:
    path: str  # relative to the repository's top
    digest: str  # sha256 of the content
    size: int
    executable: bool


@dataclass(frozen=True)
class Snapshot:
    root: Path
    files: tuple[SnapshotFile, ...]
    commit: str | None  # HEAD, or None before the first commit
    dirty: bool  # uncommitted changes or untracked files went in
    note: str | None = None  # the line saying it was not taken from git (not a git repository)

    @property
    def manifest(self) -> bytes:
        return "".join(f"{f.digest} {'x' if f.executable else '-'} {f.path}\n" for f in self.files).encode()

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.manifest).hexdigest()

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def take_snapshot(directory: Path, limit_mb: int = 100) -> Snapshot:
    """The snapshot of the project around ``directory``; SnapshotError in one line when it cannot be."""
    listed = list_files(directory)
    root = listed.root
    files: list[SnapshotFile] = []
    for name in listed.names:
        path = root / name
        try:
            info = os.lstat(path)
        except FileNotFoundError:  # tracked, deleted in the working tree: the job must not see it either
            continue
        if not path.is_file() or path.is_symlink():
            continue  # links and submodules are not copied: a link may point off the project
        data = path.read_bytes()
        files.append(SnapshotFile(name, hashlib.sha256(data).hexdigest(), len(data), bool(info.st_mode & 0o111)))
    if listed.git:
        commit = git(root, "rev-parse", "--verify", "-q", "HEAD")
        status = git(root, "status", "--porcelain", "--untracked-files=normal")
        snap = Snapshot(root, tuple(files), commit.stdout.decode().strip() or None, bool(status.stdout.strip()))
    else:
        snap = Snapshot(root, tuple(files), None, False, listed.note)
    if snap.size > limit_mb * MB:
        largest = sorted(files, key=lambda f: f.size, reverse=True)[:3]
        named = ", ".join(f"{f.path} ({f.size / MB:.1f} MB)" for f in largest)
        raise SnapshotError(
            f"{root}: the snapshot is {snap.size / MB:.1f} MB, over the limit of {limit_mb} MB; largest: {named}; "
            "add them to .gitignore (data belongs on the cluster), raise the profile's snapshot_limit_mb, "
            "or use --no-snapshot"
        )
    return snap


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
        files.append(SnapshotFile(name, hashlib.sha256(data).hexdigest(), len(data), False))
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
if [ -f "$w/snapshots/{h}/complete" ] && sg_own "$w/snapshots/{h}" >/dev/null; then echo have; exit 0; fi
mkdir -p "$w/objects" "$w/snapshots" || exit 3
while read -r d; do
  [ -f "$w/objects/$d" ] && [ "$(sha256sum < "$w/objects/$d" | cut -d' ' -f1)" = "$d" ] || echo "$d"
done
"""

# Store the sent objects (each checked against its name), then build the snapshot beside its final place and rename
# it there. The tar holds the objects and MANIFEST (digest, x or -, path per line). Any failure removes what it made.
_STORE = """set -u
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
  mv -f "$f" "$w/objects/$d" || fail "storing object $d"; new[$d]=1
done
rmdir "$i"; mkdir -p "$t/files" || fail "cannot make $t"
mv "$i.manifest" "$t/manifest"
while read -r d x p; do
  mkdir -p "$t/files/$(dirname "$p")" || fail "cannot make a directory for $p"
  e=$(cp "$w/objects/$d" "$t/files/$p" 2>&1) || fail "copying $p: $(printf '%s' "$e" | tail -1)"
  # an object not stored by this call is used only when its bytes (as copied) hash to its name
  [ -n "${{new[$d]:-}}" ] || [ "$(sha256sum < "$t/files/$p" | cut -d' ' -f1)" = "$d" ] ||
    fail "object $d in the store does not hash to its name; remove $w/objects/$d and submit again"
  [ "$x" = x ] && chmod +x "$t/files/$p"
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
    info.size, info.mode = len(data), 0o444
    tar.addfile(info, io.BytesIO(data))
