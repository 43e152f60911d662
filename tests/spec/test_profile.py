"""Cluster profiles (clusters.yaml): precedence profile < spec < --set, where each value came from, one line per
problem naming the profile's file, line and field, and one spec that runs on two clusters."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_run import run_slurmgen

from slurmgen.errors import SpecError
from slurmgen.remote.transport import SshTransport, TransportError, ssh_fault
from slurmgen.spec.load import load_text
from slurmgen.spec.profile import find_profile, parse_profiles, user_profile_file

PROFILES = """\
alpha:
  host: alpha-login
  workdir: /scratch/me/slurmgen
  defaults:
    partition: gpu
    account: site-acct
    env:
      SITE: alpha
      MODE: site
    setup: ["module load cuda"]
beta:
  workdir: /work/sg
  control_persist: 60
  defaults:
    partition: cpu
"""
SPEC = 'name: t\ncommand: [echo, hi]\ntime: "10:00"\naccount: mine\nenv:\n  MODE: spec\n'


# (overrides, field, expected value, where from)
PRECEDENCE = [
    ([], "partition", "gpu", "profile clusters.yaml:5"),  # only the profile says
    ([], "account", "mine", "spec t.yaml:4"),  # the spec beats the profile
    ([], "env.SITE", "alpha", "profile clusters.yaml:8"),  # mappings merge key by key
    ([], "env.MODE", "spec", "spec t.yaml:6"),
    (["env.MODE=cli"], "env.MODE", "cli", "--set"),  # --set beats both
    (["partition=debug"], "partition", "debug", "--set"),
    ([], "setup", ["module load cuda"], "profile clusters.yaml:10"),
]


@pytest.mark.parametrize(("overrides", "field", "value", "origin"), PRECEDENCE)
def test_profile_then_spec_then_set(overrides: list[str], field: str, value: object, origin: str) -> None:
    profile = parse_profiles(PROFILES, "clusters.yaml")["alpha"]
    loaded = load_text(SPEC, "t.yaml", overrides, profile)
    rows = {name: (val, where) for name, val, where in loaded.origins}
    assert rows[field] == (value, origin)
    spec_value = loaded.spec.to_dict()
    for part in field.split("."):
        spec_value = dict(spec_value)[part]  # env is kept as (name, value) pairs
    assert (list(spec_value) if isinstance(spec_value, tuple) else spec_value) == value


def test_one_spec_runs_on_two_clusters() -> None:
    profiles = parse_profiles(PROFILES, "clusters.yaml")
    assert load_text(SPEC, "t.yaml", [], profiles["alpha"]).spec.partition == "gpu"
    assert load_text(SPEC, "t.yaml", [], profiles["beta"]).spec.partition == "cpu"
    assert load_text(SPEC, "t.yaml", []).spec.partition is None
    assert profiles["beta"].host is None and profiles["beta"].control_persist == 60
    assert profiles["alpha"].control_persist == 600 and profiles["alpha"].snapshot_limit_mb == 100


# (profile file text, the one error line)
BAD_PROFILES = [
    # a defaults field is checked as the spec field it sets, and named so, at the profile's line
    ("x:\n  workdir: /w\n  defaults:\n    partishun: gpu\n", "clusters.yaml:4: partishun: unknown key; did you mean"),
    ("x:\n  workdir: /w\n  defaults:\n    nodes: lots\n", "clusters.yaml:4: nodes: "),
    ("x:\n  host: alpha\n", "clusters.yaml:2: x.workdir: required: a directory on the cluster"),
    ("x:\n  workdir: /w\n  hots: a\n", "clusters.yaml:3: x.hots: unknown key; known keys: host, workdir, defaults"),
    ("x:\n  workdir: /w\n  host: -oProxyCommand=evil\n", "clusters.yaml:3: x.host: must be one ssh destination word"),
    # one word to YAML, two to ssh and to a shell the advice is pasted into: the option ran its command
    ('x:\n  workdir: /w\n  host: "name -oProxyCommand=sh /tmp/x"\n', "clusters.yaml:3: x.host: must be one ssh"),
    ('x:\n  workdir: /w\n  host: "a;touch${IFS}x"\n', "clusters.yaml:3: x.host: must be one ssh destination"),
    ('x:\n  workdir: /w\n  host: "a\\x1b[2Jb"\n', "clusters.yaml:3: x.host: must be one ssh destination"),
    ("x:\n  workdir: /w\n  control_persist: soon\n", "clusters.yaml:3: x.control_persist: must be a whole number"),
]


@pytest.mark.parametrize(("text", "line"), BAD_PROFILES)
def test_a_bad_profile_is_one_line_with_file_line_and_field(text: str, line: str) -> None:
    with pytest.raises(SpecError) as caught:
        profile = parse_profiles(text, "clusters.yaml")["x"]
        load_text(SPEC, "t.yaml", [], profile)  # defaults are checked as a spec, named by the profile's lines
    problems = [str(p) for p in caught.value.problems]
    assert len(problems) == 1
    assert problems[0].startswith(line)


def test_the_user_file_wins_over_the_checked_in_one(tmp_path: Path) -> None:
    config = tmp_path / "config"
    (config / "slurmgen").mkdir(parents=True)
    (config / "slurmgen" / "clusters.yaml").write_text("alpha:\n  host: mine\n  workdir: /mine\n")
    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "clusters.yaml").write_text(PROFILES)
    env = {"XDG_CONFIG_HOME": str(config), "HOME": str(tmp_path)}
    assert user_profile_file(env) == config / "slurmgen" / "clusters.yaml"
    assert user_profile_file({"HOME": "/h"}) == Path("/h/.config/slurmgen/clusters.yaml")
    assert find_profile("alpha", specs, env).host == "mine"
    assert find_profile("beta", specs, env).workdir == "/work/sg"
    with pytest.raises(SpecError, match="gamma: no such cluster profile"):
        find_profile("gamma", specs, env)


def test_render_cluster_shows_each_value_and_where_it_came_from(tmp_path: Path) -> None:
    (tmp_path / "clusters.yaml").write_text(PROFILES)
    (tmp_path / "t.yaml").write_text(SPEC)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "none")}
    done = run_slurmgen("render", "--cluster", "alpha", "t.yaml", "--set", "env.MODE=cli", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "#SBATCH --partition='gpu'" in done.stdout and "module load cuda" in done.stdout
    assert 'partition = "gpu"    (profile ' in done.stderr and "clusters.yaml:5)" in done.stderr
    assert 'env.MODE = "cli"    (--set)' in done.stderr
    assert 'account = "mine"    (spec t.yaml:4)' in done.stderr
    bad = run_slurmgen("validate", "--cluster", "nope", "t.yaml", cwd=tmp_path, env=env)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1


def test_run_and_doctor_take_the_profiles_defaults_here(tmp_path: Path) -> None:
    profile = "here:\n  workdir: /tmp\n  defaults:\n    env:\n      SITE_MARK: from-profile\n"
    (tmp_path / "clusters.yaml").write_text(profile)
    (tmp_path / "t.yaml").write_text('name: t\ncommand: [bash, -c, "echo mark=$SITE_MARK"]\ntime: "10:00"\n')
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "none"), "SLURMGEN_HOME": str(tmp_path / "j")}
    ran = run_slurmgen("run", "--cluster", "here", "t.yaml", cwd=tmp_path, env=env, timeout=120)
    assert ran.returncode == 0, ran.stderr
    logs = "".join(p.read_text() for p in tmp_path.rglob("*.log"))
    assert "mark=from-profile" in logs + ran.stdout + ran.stderr
    bad = run_slurmgen("doctor", "--cluster", "nowhere", "t.yaml", cwd=tmp_path, env=env)
    assert bad.returncode != 0 and "nowhere: no such cluster profile" in bad.stderr


def test_a_host_that_is_not_one_ssh_word_never_reaches_ssh_nor_advice(tmp_path: Path) -> None:
    (tmp_path / "clusters.yaml").write_text('x:\n  workdir: /w\n  host: "name -oProxyCommand=sh evil.sh"\n')
    (tmp_path / "t.yaml").write_text(SPEC)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "none")}
    done = run_slurmgen("submit", "--cluster", "x", "t.yaml", cwd=tmp_path, env=env)
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert "clusters.yaml:3: x.host: must be one ssh destination word" in line, line
    assert "`ssh " not in line
    with pytest.raises(TransportError, match="must be one ssh destination word"):
        SshTransport("x", "name -oProxyCommand=sh evil.sh")
    said = ssh_fault("x", "a;sh evil.sh", "Host key verification failed.")  # a host no check passed: not named
    assert "evil" not in said and "`ssh HOST`" in said
    for good in ("login1", "me@login.example.org", "ssh://me@[::1]:2222", "alpha-login"):
        assert "`ssh " + good + "`" in ssh_fault("x", good, "Host key verification failed.")


def test_render_cluster_masks_a_token_in_the_table_of_origins(tmp_path: Path) -> None:
    token = "hf_" + "a1B2c3D4" * 5
    (tmp_path / "clusters.yaml").write_text(f"alpha:\n  workdir: /w\n  defaults:\n    env:\n      HF_TOKEN: {token}\n")
    (tmp_path / "t.yaml").write_text(SPEC)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "none")}
    done = run_slurmgen("render", "--cluster", "alpha", "t.yaml", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert token not in done.stdout and token not in done.stderr  # was: printed in full in the table
    assert "env.HF_TOKEN = '<secret: masked>'    (profile " in done.stderr, done.stderr
