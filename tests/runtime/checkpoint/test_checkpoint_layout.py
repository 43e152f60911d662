"""Sharded checkpoint names, completeness, sweep and prune on a real directory; save records and the window."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from runtime.runtime_helpers import ROOT
from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.context import JobContext
from slurmgen.runtime.checkpoint import layout
from slurmgen.runtime.checkpoint.layout import keep_count
from slurmgen.runtime.checkpoint.record import fits_window, window_warning


def test_names_and_sequence_numbers() -> None:
    entries = ["77.state", "77.state.000003", "77.state.000010", ".77.state.000011.ab12cd34.tmp", "77.state.x"]
    entries += [".77.state.k2j3l4.tmp", "78.state.000099", "77.state.requeues", ".77.state.000002.ff.tmp"]
    assert layout.complete_seqs("77.state", entries) == [3, 10]
    assert layout.next_seq("77.state", entries) == 12  # past the save in progress too
    assert layout.next_seq("77.state", []) == 1
    assert layout.complete_name("77.state", 12) == "77.state.000012"
    temp = layout.temp_name("77.state", 12)
    assert temp.startswith(".77.state.000012.") and temp.endswith(".tmp") and layout.is_temp("77.state", temp)
    assert layout.temp_name("77.state", 12) != temp
    assert not layout.is_temp("77.state", "77.state.000012")
    assert not layout.is_temp("77.state", ".78.state.000001.ab.tmp")


@pytest.mark.parametrize(
    ("seqs", "keep", "pruned"),
    [([1, 2, 3], 2, [1]), ([3, 1, 2, 5], 1, [1, 2, 3]), ([4], 2, []), ([], 2, []), ([1, 2], 2, [])],
)
def test_prune_keeps_the_newest(seqs: list[int], keep: int, pruned: list[int]) -> None:
    assert layout.to_prune(seqs, keep) == pruned


def _checkpoint(root: Path, name: str, *, marker: bool = True) -> Path:
    path = root / name
    path.mkdir()
    (path / "__0_0.distcp").write_bytes(b"x" * 100)
    if marker:
        (path / layout.MARKER).write_text("{}")
    return path


def test_complete_means_final_name_and_marker(tmp_path: Path) -> None:
    _checkpoint(tmp_path, "77.state.000001")
    _checkpoint(tmp_path, "77.state.000002", marker=False)  # never happens by rename; a hand-made copy, say
    _checkpoint(tmp_path, ".77.state.000003.ab12cd34.tmp")
    assert layout.complete_dirs(str(tmp_path), "77.state") == [(1, str(tmp_path / "77.state.000001"))]
    assert layout.complete_dirs(str(tmp_path / "absent"), "77.state") == []


def test_remove_renames_before_deleting_and_sweep_takes_the_rest(tmp_path: Path) -> None:
    _checkpoint(tmp_path, "77.state.000001")
    _checkpoint(tmp_path, "77.state.000002")
    stale = _checkpoint(tmp_path, ".77.state.000003.ab12cd34.tmp")
    other = _checkpoint(tmp_path, ".78.state.000001.ab12cd34.tmp")  # another job's: not ours to sweep
    (tmp_path / ".77.state.qwerty.tmp").write_bytes(b"plain temp")  # a plain save's: runtime/state.py sweeps it
    layout.remove(str(tmp_path), "77.state", 1)
    assert [s for s, _ in layout.complete_dirs(str(tmp_path), "77.state")] == [2]
    removed = layout.sweep_dirs(str(tmp_path), "77.state")
    assert removed == [str(stale)]
    assert sorted(os.listdir(tmp_path)) == [".77.state.qwerty.tmp", ".78.state.000001.ab12cd34.tmp", "77.state.000002"]
    assert other.is_dir()
    assert layout.tree_size(str(tmp_path / "77.state.000002")) == 102


def test_fits_window() -> None:
    assert fits_window(10.0, 30.0)
    assert fits_window(10.0, 30.0, step_s=20.0)
    assert not fits_window(10.0, 30.0, step_s=20.5)
    assert window_warning(10.0, 30.0, 5.0) is None
    warning = window_warning(40.0, 30.0, 2.0)
    assert warning is not None
    assert "40.0 s plus a step of 2.0 s, more than the 30.0 s between the stop signal and the kill" in warning


def test_keep_count() -> None:
    assert keep_count(None, JobContext.from_environ({})) == contract.DEFAULT_KEEP == 2
    assert keep_count(None, JobContext.from_environ({contract.KEEP: "5"})) == 5
    assert keep_count(3, JobContext.from_environ({contract.KEEP: "5"})) == 3  # the argument wins
    with pytest.raises(RuntimeSetupError, match=r"SLURMGEN_KEEP='0': the number of checkpoints to keep"):
        keep_count(None, JobContext.from_environ({contract.KEEP: "0"}))
    with pytest.raises(RuntimeSetupError, match=r"Preemption\(keep=...\)='-1'"):
        keep_count(-1, JobContext.from_environ({}))


def test_torch_extra_brings_numpy() -> None:
    """torch's object collectives (used by every sharded save and load) call tensor.numpy()."""
    # tomllib is 3.11's; the suite runs on 3.11 and later, and mypy checks for 3.10 (requires-python).
    tomllib = importlib.import_module("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.split(">")[0].split("=")[0].strip() == "numpy" for req in extras["torch"])
