"""A secret forwarded with `env: {X: {from_env: X}}` reaches the tasks and is written
nowhere: grepped in every file the job wrote and every line slurmgen printed (render, --dry-run, the run)."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen

from slurmgen.spec.load import load_text
from slurmgen.spec.secrets import MASK

SECRET = "hf_" + "Zq9" * 12  # a Hugging Face token's shape; only this test knows it
PROGRAM = "import hashlib, os; print('got', hashlib.sha256(os.environ['HF_TOKEN'].encode()).hexdigest())"


def spec_text() -> str:
    return (
        f"name: s\ncommand: [{sys.executable}, -c, \"{PROGRAM}\"]\ntime: '00:05:00'\npreemption: false\n"
        "env:\n  HF_TOKEN: {from_env: HF_TOKEN}\n"
    )


def every_file_contains(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]


@pytest.mark.slow
def test_a_forwarded_secret_reaches_the_task_and_is_written_nowhere(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(spec_text())
    env = {**os.environ, "HF_TOKEN": SECRET}
    printed = ""
    for args in (("render", "s.yaml"), ("submit", "--dry-run", "s.yaml"), ("run", "s.yaml")):
        done = run_slurmgen(*args, cwd=tmp_path, env=env, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        printed += done.stdout + done.stderr
    assert "#SBATCH --export='ALL,HF_TOKEN'" in printed  # Slurm carries the value: sbatch(1) --export
    assert SECRET not in printed
    assert every_file_contains(tmp_path, SECRET.encode()) == []  # script copy, logs, journal, history, run dir
    (log,) = (tmp_path / "logs").glob("s-*.log")
    node_logs = b"".join(p.read_bytes() for p in (tmp_path / "logs").rglob("*.log"))
    assert f"got {hashlib.sha256(SECRET.encode()).hexdigest()}".encode() in node_logs, log.read_text()


def test_a_missing_forwarded_variable_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(spec_text())
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    done = run_slurmgen("run", "s.yaml", cwd=tmp_path, env=env, timeout=120)
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert "env.HF_TOKEN (from_env: HF_TOKEN): not set in this environment; export HF_TOKEN" in line


def test_a_dry_run_with_a_missing_forwarded_variable_says_the_submit_would_be_refused(tmp_path: Path) -> None:
    """`submit --dry-run` tells what submit would do: with the variable unset, refuse in the same line, not print a
    `would run: sbatch ...`; with it set, the dry run goes through."""
    (tmp_path / "s.yaml").write_text(spec_text())
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    done = run_slurmgen("submit", "s.yaml", "--dry-run", cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "env.HF_TOKEN (from_env: HF_TOKEN): not set in this environment" in line and "would be refused" in line
    assert not (tmp_path / "logs").exists() and not (tmp_path / ".slurmgen").exists()
    through = run_slurmgen("submit", "s.yaml", "--dry-run", cwd=tmp_path, env={**env, "HF_TOKEN": SECRET})
    assert through.returncode == 0 and "would run: sbatch" in through.stderr, through.stderr
    assert SECRET not in through.stdout + through.stderr


def test_a_literal_token_warns_naming_the_field_and_render_masks_it(tmp_path: Path) -> None:
    text = "name: s\ncommand: [python3, -c, '1']\ntime: '00:05:00'\nenv:\n  MY_KEY: " + SECRET + "\n"
    loaded = load_text(text, "s.yaml")
    (warning,) = [w for w in loaded.warnings if w.path == "env.MY_KEY"]
    assert "looks like a token" in warning.message and "MY_KEY: {from_env: MY_KEY}" in warning.message
    (tmp_path / "s.yaml").write_text(text)
    done = run_slurmgen("render", "s.yaml", cwd=tmp_path)
    assert SECRET not in done.stdout + done.stderr and f"export MY_KEY={MASK}" in done.stdout


def test_a_renamed_forward_copies_the_variable_in_the_script_by_name() -> None:
    from slurmgen.script.sweep import env_words

    spec = load_text("name: s\ncommand: [a]\ntime: '00:05:00'\nenv: {WANDB_API_KEY: {from_env: MY_KEY}}\n", "s").spec
    assert [(n, str(w)) for n, w in env_words(spec)] == [("WANDB_API_KEY", '"${MY_KEY}"')]


def test_a_secret_a_cluster_profile_forwards_is_written_nowhere_either(tmp_path: Path) -> None:
    """A profile's `defaults.env` (clusters.yaml beside the spec) forwards a secret the same way a spec does: the
    script names it on --export and `render --cluster` (which also says where each value came from) never prints
    the value."""
    (tmp_path / "clusters.yaml").write_text(
        "here:\n  workdir: work\n  defaults:\n    env:\n      HF_TOKEN: {from_env: HF_TOKEN}\n"
    )
    (tmp_path / "p.yaml").write_text(f"name: p\ncommand: [{sys.executable}, -c, 'print(1)']\ntime: '00:05:00'\n")
    done = run_slurmgen("render", "p.yaml", "--cluster", "here", cwd=tmp_path, env={**os.environ, "HF_TOKEN": SECRET})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "#SBATCH --export='ALL,HF_TOKEN'" in done.stdout
    assert SECRET not in done.stdout + done.stderr and every_file_contains(tmp_path, SECRET.encode()) == []
