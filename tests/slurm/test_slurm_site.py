"""What a site's Slurm does on preemption: `scontrol show config` / `show partition` parsed from recorded and
hand-written output, the plan (mode, grace, user signal, windows), the save-window check and the risks."""

from __future__ import annotations

from pathlib import Path

import pytest
from recorded import TESTS

from slurmgen import run_history
from slurmgen.errors import SchedulerError
from slurmgen.slurm import site
from slurmgen.slurm.site import PartitionInfo, SiteConfig, SitePreemption

SLURM_DATA = TESTS / "data" / "slurm"
PRIMARY = "22.05"


def recording_dirs() -> list[tuple[str, Path]]:
    """(version, directory) of every recorded `scontrol show config`: one directory per Slurm version
    (tests/data/slurm/<version>/, tests/cluster/record-output.sh)."""
    return sorted((d.name, d) for d in SLURM_DATA.glob("*/") if (d / "show-config.out").is_file())


def text(name: str, directory: Path = SLURM_DATA) -> str:
    return (directory / name).read_text()


def config(**kw: object) -> SiteConfig:
    values: dict[str, object] = {
        "version": "22.05.8", "kill_wait": 30, "job_requeue": True, "preempt_type": "preempt/partition_prio",
        "preempt_mode": "REQUEUE", "user_signal": False, "raw": {},
    }  # fmt: skip
    values.update(kw)
    return SiteConfig(**values)  # type: ignore[arg-type]


def partition(name: str = "low", mode: str | None = "REQUEUE", grace: int = 0) -> PartitionInfo:
    return PartitionInfo(name, mode, grace, 1, False, {})


# --- every recorded version ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "directory"), recording_dirs(), ids=[v for v, _ in recording_dirs()])
def test_recorded_config_and_partitions_of_each_version(version: str, directory: Path) -> None:
    conf = site.parse_config(text("show-config.out", directory))
    assert conf.version is not None and conf.version.startswith(version + ".")
    assert conf.kill_wait > 0 and conf.preempt_type.startswith("preempt/")
    assert conf.raw["ClusterName"] == "slurmgen"
    if (directory / "show-config-user-signal.out").is_file():  # the harness switches it on for one recording
        assert not conf.user_signal
        assert site.parse_config(text("show-config-user-signal.out", directory)).user_signal
    parts = site.parse_partitions(text("show-partition-o.out", directory))
    assert len({p.name for p in parts}) == len(parts) > 0
    assert [p.name for p in parts if p.default] == ["debug"]
    if (directory / "show-partition.out").is_file():  # the block form says the same
        assert site.parse_partitions(text("show-partition.out", directory)) == parts
    for part in parts:
        plan = site.site_preemption(conf, part, 300)
        assert plan.windows[site.TIME_LIMIT] == 300
        if plan.mode in site.STOPPING_MODES:
            assert plan.windows[site.PREEMPTION] == part.grace_time + conf.kill_wait
        else:
            assert site.PREEMPTION not in plan.windows


def test_the_recorded_2205_cluster() -> None:
    """The harness's cluster (tests/cluster/up.sh): partition_prio, debug and high never preempted, four low
    partitions with REQUEUE/CANCEL and GraceTime 0/10, KillWait 5."""
    directory = SLURM_DATA / PRIMARY
    conf = site.parse_config(text("show-config.out", directory))
    assert (conf.version, conf.kill_wait, conf.job_requeue) == ("22.05.8", 5, True)
    assert (conf.preempt_type, conf.preempt_mode, conf.user_signal) == ("preempt/partition_prio", "REQUEUE", False)
    assert conf.raw["SlurmctldHost[0]"].endswith(".1)") and conf.raw["PowerPlugin"] == ""  # host(address)
    parts = {p.name: p for p in site.parse_partitions(text("show-partition-o.out", directory))}
    assert {name: (p.preempt_mode, p.grace_time, p.priority_tier, p.default) for name, p in parts.items()} == {
        "debug": ("OFF", 0, 1, True),
        "high": ("OFF", 0, 2, False),
        "low-requeue": ("REQUEUE", 0, 1, False),
        "low-requeue-grace": ("REQUEUE", 10, 1, False),
        "low-cancel": ("CANCEL", 0, 1, False),
        "low-cancel-grace": ("CANCEL", 10, 1, False),
    }
    assert parts["debug"].raw["TRES"] == "cpu=6,mem=6000M,node=3,billing=6"  # a value with "=" in it
    plan = site.site_preemption(conf, parts["debug"], None)
    assert (plan.mode, dict(plan.windows)) == ("OFF", {})


# --- the spellings of the user signal ---------------------------------------------------------------------------


def test_user_signal_2205_spelling_in_slurmctld_parameters() -> None:
    conf = site.parse_config(text("handwritten-show-config-22.05-user-signal.out"))
    assert (conf.user_signal, conf.job_requeue, conf.kill_wait, conf.preempt_mode) == (True, False, 30, "REQUEUE")


def test_user_signal_2302_spelling_in_preempt_parameters() -> None:
    conf = site.parse_config(text("handwritten-show-config-23.02-user-signal.out"))
    assert (conf.version, conf.user_signal, conf.preempt_mode) == ("23.02.7", True, "CANCEL")


@pytest.mark.parametrize(
    ("version", "ctld", "preempt", "on"),
    [
        ("22.05.8", "(null)", "send_user_signal", False),  # 22.05 has no PreemptParameters: not honoured
        ("22.05.8", "PREEMPT_SEND_USER_SIGNAL", "(null)", True),  # xstrcasestr: any case
        ("23.02.7", "preempt_send_user_signal", "(null)", True),  # the old spelling is still honoured
        ("24.11.5", "(null)", "send_user_signal", True),
        ("26.05.3", "(null)", "reclaim_licenses", False),
        ("26.05.3", "(null)", "(null)", False),
    ],
)
def test_user_signal_by_version(version: str, ctld: str, preempt: str, on: bool) -> None:
    lines = [f"SLURM_VERSION = {version}", f"SlurmctldParameters = {ctld}", f"PreemptParameters = {preempt}"]
    assert site.parse_config("\n".join(lines)).user_signal is on


@pytest.mark.parametrize(
    ("version", "spelling"),
    [
        ("22.05.8", "SlurmctldParameters=preempt_send_user_signal"),
        ("23.02.0", "PreemptParameters=send_user_signal"),
        ("24.11.5", "PreemptParameters=send_user_signal"),
        ("26.05.0-0rc1", "PreemptParameters=send_user_signal"),
        ("18.08.9", "SlurmctldParameters=preempt_send_user_signal (needs Slurm 19.05 or later)"),
    ],
)
def test_user_signal_spelling(version: str, spelling: str) -> None:
    assert site.user_signal_spelling(version) == spelling


def test_user_signal_spelling_of_an_unknown_version_gives_both() -> None:
    both = site.user_signal_spelling(None)
    assert "PreemptParameters=send_user_signal" in both and "SlurmctldParameters=preempt_send_user_signal" in both


def test_config_defaults_and_garbage() -> None:
    conf = site.parse_config("SLURM_VERSION = 22.05.8\n")
    assert (conf.kill_wait, conf.job_requeue, conf.preempt_type, conf.preempt_mode) == (30, True, "preempt/none", "OFF")
    with pytest.raises(SchedulerError, match="no configuration in its output"):
        site.parse_config("slurm_load_ctl_conf error: Unable to contact slurm controller\n")


# --- partitions ---------------------------------------------------------------------------------------------


def test_partitions_with_preemption() -> None:
    parts = {p.name: p for p in site.parse_partitions(text("handwritten-show-partition-o-preempt.out"))}
    assert list(parts) == ["debug", "high", "low", "low-grace", "low-cancel", "scavenger"]
    assert (parts["low-cancel"].preempt_mode, parts["low-cancel"].grace_time) == ("CANCEL", 30)
    assert (parts["high"].priority_tier, parts["scavenger"].preempt_mode) == (2, "GANG,SUSPEND")
    assert site.default_partition(list(parts.values())) == parts["debug"]


def test_partition_oddities() -> None:
    assert site.parse_partitions("No partitions in the system\n") == []
    (odd,) = site.parse_partitions("PartitionName=x Nodes=a b PreemptMode=(null)\n")
    assert (odd.raw["Nodes"], odd.preempt_mode, odd.grace_time, odd.priority_tier) == ("a b", None, 0, 1)
    with pytest.raises(SchedulerError, match="unexpected line"):
        site.parse_partitions("Partition nope not found\n")


# --- the plan -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("printed", "word"),
    [("REQUEUE", "REQUEUE"), ("GANG,SUSPEND", "SUSPEND"), ("WITHIN,CANCEL", "CANCEL"), ("GANG", "OFF"), (None, "OFF")],
)
def test_mode_word_masks_gang_and_within(printed: str | None, word: str) -> None:
    assert site.mode_word(printed) == word


def test_windows_by_grace_and_lead() -> None:
    conf = config(kill_wait=30)
    assert dict(site.site_preemption(conf, partition(grace=0), None).windows) == {"preemption": 30.0}
    grace = site.site_preemption(conf, partition(grace=120), 300)
    assert dict(grace.windows) == {"preemption": 150.0, "time-limit": 300.0} and grace.grace == 120
    assert site.window_basis(grace, "preemption") == "GraceTime 120 s + KillWait 30 s"


def test_the_partitions_mode_beats_the_clusters() -> None:
    conf = config(preempt_mode="REQUEUE")
    assert site.site_preemption(conf, partition(mode="CANCEL"), None).mode == "CANCEL"
    assert site.site_preemption(conf, partition(mode=None), None).mode == "REQUEUE"
    assert site.site_preemption(conf, partition(mode="OFF"), None).mode == "OFF"
    assert site.site_preemption(conf, None, None).mode == "REQUEUE"


def test_no_preemption_type_means_no_preemption() -> None:
    plan = site.site_preemption(config(preempt_type="preempt/none", preempt_mode="REQUEUE"), partition(grace=60), 300)
    assert (plan.mode, plan.grace, dict(plan.windows)) == ("OFF", 0, {"time-limit": 300.0})


def test_qos_preemption_takes_the_clusters_mode_and_no_grace() -> None:
    plan = site.site_preemption(
        config(preempt_type="preempt/qos", preempt_mode="CANCEL"), partition("p", "OFF", 60), None
    )
    assert (plan.mode, plan.grace, dict(plan.windows)) == ("CANCEL", 0, {"preemption": 30.0})
    assert any("sacctmgr show qos" in r.fix for r in site.risks(plan, None, None, None))


def test_the_plan_round_trips_through_a_run_start_record() -> None:
    plan = site.site_preemption(config(user_signal=True), partition(grace=60), 300)
    assert site.site_preemption_from_event(site.site_preemption_event(plan)) == plan
    assert site.site_preemption_from_event(
        {"mode": "REQUEUE", "grace": 30, "kill_wait": 5, "windows": {"preemption": 35}}
    ) == (SitePreemption(None, "REQUEUE", 30, False, 5, True, {"preemption": 35.0}))
    for junk in (None, "x", {"mode": "REQUEUE"}, {"windows": {"preemption": "soon"}}):
        assert site.site_preemption_from_event(junk) is None


def test_causes_are_the_run_historys() -> None:
    assert (site.PREEMPTION, site.TIME_LIMIT) == (run_history.PREEMPTION, run_history.TIME_LIMIT)


# --- windows and risks -------------------------------------------------------------------------------------------


def test_window_problems() -> None:
    plan = site.site_preemption(config(kill_wait=30), partition(grace=0), 60)  # preemption 30 s, time-limit 60 s
    assert site.window_problems(plan, 28.0, 2.0) == []  # exactly fits
    assert site.window_problems(plan, 25.0, None) == []
    problems = site.window_problems(plan, 50.0, 12.5)
    assert problems == [
        "preemption: the last save (50.0 s) plus a step (12.5 s) does not fit the 30 s window (KillWait 30 s, "
        "no GraceTime)",
        "time-limit: the last save (50.0 s) plus a step (12.5 s) does not fit the 60 s window (the --signal lead time)",
    ]


def kinds(found: list[site.Risk]) -> list[str]:
    return [r.what.split(":")[0] for r in found]


def test_the_configuration_to_ask_for_has_no_risk() -> None:
    plan = site.site_preemption(config(user_signal=True), partition(grace=60), 300)
    assert site.risks(plan, 300, 20.0, 1.0, time_limit=3600) == []


def test_risks_of_cancel_without_grace_nor_user_signal() -> None:
    plan = site.site_preemption(config(version="24.11.5", job_requeue=False), partition("scav", "CANCEL", 0), 300)
    found = site.risks(plan, 300, 45.0, 1.0, time_limit=3600)
    assert kinds(found) == [
        "PreemptMode=CANCEL", "SIGKILL mid-save", "no user signal at preemption", "GraceTime=0 on partition scav",
        "JobRequeue=0",
    ]  # fmt: skip
    cancel, window, signal, grace, requeue = found
    assert cancel.fix == (
        "ask your admins for PreemptMode=REQUEUE, GraceTime >= 60 on partition scav and the user signal "
        "(PreemptParameters=send_user_signal)"
    )
    assert "PreemptParameters=send_user_signal" in cancel.fix and "PreemptParameters=send_user_signal" in signal.fix
    assert "(45.0 s) plus a step (1.0 s)" in window.what and "GraceTime >= 60" in window.fix
    assert "batch shell and the tasks" in signal.what and "must save on SIGTERM" in signal.what
    assert "must fit 30 s" in grace.what
    assert requeue.fix.startswith("nothing to do") and "--requeue" in requeue.fix


def test_cancel_asks_only_for_what_is_missing() -> None:
    plan = site.site_preemption(config(user_signal=True), partition(mode="CANCEL", grace=120), None)
    (cancel,) = site.risks(plan, None, None, None)
    assert cancel.fix == "ask your admins for PreemptMode=REQUEUE"


def test_grace_without_user_signal_reaches_only_the_tasks() -> None:
    plan = site.site_preemption(config(), partition(grace=30), None)
    (signal,) = site.risks(plan, None, None, None)
    assert "tasks only, not the batch shell" in signal.what
    assert "SlurmctldParameters=preempt_send_user_signal" in signal.fix  # the 22.05 spelling


def test_risks_of_a_slow_save_under_a_time_limit() -> None:
    plan = site.site_preemption(config(preempt_type="preempt/none"), None, 120)
    (window,) = site.risks(plan, 120, 150.0, 10.0)
    assert window.what.startswith("SIGKILL mid-save: time-limit") and "lead_time to at least 190 s" in window.fix


def test_lead_time_near_the_time_limit() -> None:
    plan = site.site_preemption(config(preempt_type="preempt/none"), None, 300)
    assert site.risks(plan, 300, None, None, time_limit=660) == []  # 300 s of work even if the signal is 60 s early
    (near,) = site.risks(plan, 300, None, None, time_limit=659)
    assert "near the 659 s time limit" in near.what and "299 s into a run" in near.what
    assert "lead_time to at most 299 s" in near.fix


def test_suspend_needs_nothing() -> None:
    plan = site.site_preemption(config(preempt_mode="SUSPEND,GANG"), partition(mode="GANG,SUSPEND"), 300)
    (suspend,) = site.risks(plan, 300, 500.0, None)[-1:]
    assert plan.mode == "SUSPEND" and site.PREEMPTION not in plan.windows
    assert suspend.what.startswith("PreemptMode=SUSPEND") and suspend.fix.startswith("nothing to do")


# --- the requeue delay and the expedited requeue ----------------------------------------------------------------


@pytest.mark.parametrize(("version", "directory"), recording_dirs(), ids=[v for v, _ in recording_dirs()])
def test_each_recorded_cluster_says_its_requeue_delay(version: str, directory: Path) -> None:
    """The harness sets AuthInfo=cred_expire=5 and no requeue_delay (tests/cluster/up.sh): 5 s on every version,
    and no expedited requeue (none of the recorded versions but 26.05 knows it, and it is not switched on)."""
    conf = site.parse_config(text("show-config.out", directory))
    assert (conf.requeue_delay, conf.requeue_delay_from) == (5, "AuthInfo=cred_expire=5")
    assert not conf.expedited_requeue


def test_requeue_delay_from_scheduler_parameters_from_2511() -> None:
    conf = site.parse_config(text("handwritten-show-config-25.11-expedite.out"))
    assert (conf.version, conf.requeue_delay) == ("25.11.7", 30) and conf.expedited_requeue
    assert conf.requeue_delay_from == "SchedulerParameters=requeue_delay=30"


def with_lines(base: str, **lines: str) -> str:
    """A `show config` text with the named keys' values replaced."""
    out = []
    for line in text(base).splitlines():
        key = line.split("=")[0].strip()
        out.append(f"{key:<24}= {lines[key]}" if key in lines else line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    ("version", "scheduler", "auth", "delay", "source"),
    [
        # 25.11 reads requeue_delay; older releases do not have it (slurm.conf.5 of 25.11 is the first to list it)
        ("24.11.5", "requeue_delay=30", "socket=/x", 120, "Slurm's default (AuthInfo cred_expire 120 s)"),
        ("25.11.7", "bf_interval=1,requeue_delay=0", "cred_expire=60", 0, "SchedulerParameters=requeue_delay=0"),
        ("26.05.5", "(null)", "socket=/x,cred_expire=60", 60, "AuthInfo=cred_expire=60"),
        # src/interfaces/cred.c: a cred_expire below 5 is an error and the default stays
        ("22.05.8", "(null)", "cred_expire=2", 120, "Slurm's default (AuthInfo cred_expire 120 s)"),
        ("25.11.7", "requeue_delay=soon", "(null)", 120, "Slurm's default (AuthInfo cred_expire 120 s)"),
    ],
)
def test_requeue_delay_by_version_and_setting(version: str, scheduler: str, auth: str, delay: int, source: str
                                              ) -> None:  # fmt: skip
    conf = site.parse_config(with_lines("handwritten-show-config-25.11-expedite.out", SLURM_VERSION=version,
                                        SchedulerParameters=scheduler, AuthInfo=auth))  # fmt: skip
    assert (conf.requeue_delay, conf.requeue_delay_from) == (delay, source)


def test_expedited_requeue_only_where_the_site_enables_it_on_2511_and_later() -> None:
    from slurmgen.slurm.expedite import expedite_problem, expedite_refusal

    base = "handwritten-show-config-25.11-expedite.out"
    on = site.parse_config(text(base))
    assert expedite_problem(on) is None and expedite_refusal(on, "jobs/x.yaml") is None
    off = site.parse_config(with_lines(base, SlurmctldParameters="(null)"))
    assert expedite_refusal(off, "jobs/x.yaml") == (
        "jobs/x.yaml: recovery.expedite: this cluster does not allow it (SlurmctldParameters has no "
        "enable_expedited_requeue; slurmctld would refuse the job); fix: remove recovery.expedite, or ask the "
        "admins to enable it"
    )
    old = site.parse_config(text("show-config.out", SLURM_DATA / PRIMARY))
    assert (problem := expedite_problem(old)) is not None and problem.startswith("Slurm 22.05.8 has no expedited")
    # the setting on a release that does not know it counts for nothing
    older = site.parse_config(with_lines(base, SLURM_VERSION="24.11.5"))
    assert not older.expedited_requeue and (expedite_problem(older) or "").startswith("Slurm 24.11.5 has no")
