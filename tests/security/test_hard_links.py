"""A hard link planted in a shared state directory as `.slurmgen-local-ids`, to a file of the victim's elsewhere:
an owner check passes (the file is the victim's), so only its link count tells (trust.open_write). Linux refuses
such a link where fs.protected_hardlinks is 1 (proc(5)), so the attack needs it at 0, as on a node that does not
set it: the test sets it to 0 around the planting and restores it. The victim is uid 1, not root."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from security.other_users import VICTIM, as_victim, need_root, plant
from slurmgen import trust
from slurmgen.local import setup
from slurmgen.spec.load import load_file

PROTECTED = Path("/proc/sys/fs/protected_hardlinks")
QUICK = 'name: q\ncommand: ["true"]\ntime: "00:10:00"\npreemption: {state_dir: STATE}\n'


@pytest.fixture
def victim_place() -> Iterator[Path]:
    """A directory of the victim's (searchable by others), with a sticky world-writable `state` in it."""
    need_root()
    top = Path(tempfile.mkdtemp(prefix="slurmgen-hardlink-"))
    top.chmod(0o755)
    (top / "state").mkdir(mode=0o1777)
    (top / "state").chmod(0o1777)
    (top / "precious").write_text("precious\n")
    (top / "precious").chmod(0o644)
    subprocess.run(["chown", "-R", f"{VICTIM}:{VICTIM}", str(top)], check=True)
    try:
        yield top
    finally:
        subprocess.run(["rm", "-rf", str(top)], check=True)


def plant_hard_link(target: Path, link: Path) -> None:
    try:
        before = PROTECTED.read_text()
        PROTECTED.write_text("0")
    except OSError as exc:
        pytest.skip(f"cannot set fs.protected_hardlinks to 0 for the planting ({exc.strerror})")
    try:
        plant(f"ln {target} {link}")
    finally:
        PROTECTED.write_text(before)
    assert PROTECTED.read_text() == before


def test_a_hard_link_to_the_victims_file_as_the_id_ledger_gets_no_line(victim_place: Path) -> None:
    precious, ledger = victim_place / "precious", victim_place / "state" / setup.STATE_LEDGER
    with pytest.raises(subprocess.CalledProcessError):  # with the kernel's protection on, the planting fails
        plant(f"ln {precious} {ledger}")
    plant_hard_link(precious, ledger)
    spec_path = victim_place / "q.yaml"
    spec_path.write_text(QUICK.replace("STATE", str(victim_place / "state")))
    spec = load_file(spec_path).spec
    home = victim_place / "a" / ".slurmgen"
    home.parent.mkdir()
    subprocess.run(["chown", f"{VICTIM}:{VICTIM}", str(home.parent)], check=True)

    def claim() -> str:
        try:
            setup.new_job_id(home, lambda job_id: False, setup.state_claim(spec, home, victim_place / "a"))
        except trust.Untrusted as exc:
            return str(exc)
        return "claimed"

    said = as_victim(claim)
    assert "has 2 hard links" in said and str(ledger) in said and "remove it" in said, said
    assert precious.read_text() == "precious\n"


def test_a_file_with_one_link_is_written(victim_place: Path) -> None:
    path = victim_place / "state" / "mine"

    def write() -> str:
        trust.write_whole(str(path), b"mine\n")
        return "written"

    assert as_victim(write) == "written" and path.read_text() == "mine\n"
