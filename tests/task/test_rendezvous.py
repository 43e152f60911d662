"""Master address, port, interface choice and the whole preparation, on plain values (no network)."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

import pytest

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.context import JobContext
from slurmgen.task.iface import choose_ifnames, nccl_matches, parse_proc_route, route_interface
from slurmgen.task.prepare import Host, prepare, resolve_master
from slurmgen.task.rendezvous import master_host, master_port, parse_port_range

DATA = Path(__file__).parent / "data"
EPHEMERAL = (32768, 60999)


def fake_host(
    routes: str = "proc_net_route_two_nics.txt",
    default: str | None = "sgt0",
    names: dict[str, str] | None = None,
) -> Host:
    table = {"node1": "10.77.2.5", "node2": "10.77.2.6", "localhost": "127.0.0.1", **(names or {})}

    def resolve(name: str) -> str:
        if name in table:
            return table[name]
        if name.replace(".", "").isdigit():
            return name
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    return Host(
        resolve=resolve,
        route_table=lambda: (DATA / routes).read_text(),
        interfaces=lambda: ["lo", "sgt0", "sgt0p", "sgt1", "sgt1p"],
        default_interface=lambda: default,
        ephemeral_range=lambda: EPHEMERAL,
        hostname=lambda: "node9",
    )


# --- master address ---


def test_master_is_the_first_host_of_the_step() -> None:
    env = {"SLURM_STEP_NODELIST": "gpu-[03-04]", "SLURM_JOB_NODELIST": "gpu-[01-04]"}
    assert (
        master_host(JobContext.from_environ(env)).host == "gpu-03"
    )  # a second step in the allocation gets its own master
    assert master_host(JobContext.from_environ(env)).source == "SLURM_STEP_NODELIST"
    assert master_host(JobContext.from_environ(env)).nodes == 2
    del env["SLURM_STEP_NODELIST"]
    assert master_host(JobContext.from_environ(env)).host == "gpu-01"
    assert master_host(JobContext.from_environ({"SLURM_JOB_NODELIST": "node[1-2]-ib[0-1]"})).host == "node1-ib0"


def test_explicit_master_addr_wins_and_empty_is_refused() -> None:
    env = {"SLURM_JOB_NODELIST": "n[1-2]", "MASTER_ADDR": "login"}
    assert master_host(JobContext.from_environ(env)).host == "login"
    assert master_host(JobContext.from_environ(env)).nodes == 2
    with pytest.raises(RuntimeSetupError, match="empty"):
        master_host(JobContext.from_environ({"MASTER_ADDR": " "}))


def test_no_slurm_means_localhost() -> None:
    assert master_host(JobContext.from_environ({})).host == "127.0.0.1"


def test_bad_nodelist_is_an_error() -> None:
    with pytest.raises(RuntimeSetupError, match="invalid hostlist"):
        master_host(JobContext.from_environ({"SLURM_JOB_NODELIST": "n[2-1]"}))
    with pytest.raises(RuntimeSetupError, match="names no host"):
        master_host(JobContext.from_environ({"SLURM_JOB_NODELIST": ","}))


def test_unresolvable_master_fails_fast_with_its_source() -> None:
    with pytest.raises(RuntimeSetupError) as caught:
        resolve_master(JobContext.from_environ({"SLURM_JOB_NODELIST": "nosuch[1-2]"}), fake_host())
    assert "'nosuch1' (from SLURM_JOB_NODELIST) does not resolve on node9" in str(caught.value)


def test_loopback_master_refused_on_several_nodes() -> None:
    """Debian's `127.0.1.1 <hostname>` line: the master's own node would bind gloo to lo (pytorch #67547)."""
    host = fake_host(names={"node1": "127.0.1.1"})
    with pytest.raises(RuntimeSetupError, match=r"resolves to loopback 127\.0\.1\.1 on node9.*spans 2 nodes"):
        resolve_master(JobContext.from_environ({"SLURM_JOB_NODELIST": "node[1-2]"}), host)
    resolve_master(JobContext.from_environ({"SLURM_JOB_NODELIST": "node1"}), host)  # one node: loopback is fine


def test_loopback_master_allowed_when_every_node_is_a_loopback_address() -> None:
    """`slurmgen run --local` emulates nodes as 127.0.0.1, 127.0.0.2, ...: all on this machine."""
    master, ip, _ = resolve_master(JobContext.from_environ({"SLURM_JOB_NODELIST": "127.0.0.[1-2]"}), fake_host())
    assert (master.host, ip, master.nodes, master.one_machine) == ("127.0.0.1", "127.0.0.1", 2, True)
    # One real node among them: the others could not reach a loopback master.
    assert not master_host(JobContext.from_environ({"SLURM_JOB_NODELIST": "127.0.0.1,node2"})).one_machine
    with pytest.raises(RuntimeSetupError, match="spans 2 nodes"):
        resolve_master(JobContext.from_environ({"SLURM_JOB_NODELIST": "127.0.0.1,node2"}), fake_host())
    # A name that resolves to loopback is still refused, however many of them there are.
    with pytest.raises(RuntimeSetupError, match="spans 2 nodes"):
        resolve_master(JobContext.from_environ({"SLURM_JOB_NODELIST": "localhost,localhost"}), fake_host())


# --- port ---


def test_port_from_job_id() -> None:
    env = {"SLURM_JOB_ID": "1000", contract.PORT: "20000", contract.PORT_RANGE: "100"}
    assert master_port(JobContext.from_environ(env), EPHEMERAL).port == 20000
    env["SLURM_JOB_ID"] = "1042"
    assert master_port(JobContext.from_environ(env), EPHEMERAL).port == 20042
    default = master_port(JobContext.from_environ({"SLURM_JOB_ID": "127"}), EPHEMERAL).port
    assert default == contract.DEFAULT_PORT


def test_explicit_master_port_wins() -> None:
    env = {"MASTER_PORT": "29500", contract.PORT: "50000"}  # even a bad range is irrelevant then
    assert master_port(JobContext.from_environ(env), EPHEMERAL).port == 29500
    for bad in ("0", "65536", "x", "-1"):
        with pytest.raises(RuntimeSetupError, match="MASTER_PORT"):
            master_port(JobContext.from_environ({"MASTER_PORT": bad}), EPHEMERAL)


@pytest.mark.parametrize(("base", "size"), [("32700", "127"), ("60999", "1"), ("40000", "10"), ("1", "65535")])
def test_range_into_the_ephemeral_range_is_refused(base: str, size: str) -> None:
    with pytest.raises(RuntimeSetupError) as caught:
        master_port(JobContext.from_environ({contract.PORT: base, contract.PORT_RANGE: size}), EPHEMERAL)
    message = str(caught.value)
    assert "ephemeral" in message or "not valid" in message
    assert "distributed.port / distributed.port_range" in message


def test_range_just_below_the_ephemeral_range_is_fine() -> None:
    env = {contract.PORT: "32641", contract.PORT_RANGE: "127", "SLURM_JOB_ID": "126"}
    assert master_port(JobContext.from_environ(env), EPHEMERAL).port == 32767


@pytest.mark.parametrize(
    "env",
    [
        {contract.PORT: "x"},
        {contract.PORT_RANGE: "0"},
        {contract.PORT: "65500", contract.PORT_RANGE: "100"},
        {"SLURM_JOB_ID": "12_3"},
    ],
)
def test_bad_port_settings(env: dict[str, str]) -> None:
    with pytest.raises(RuntimeSetupError):
        master_port(JobContext.from_environ(env), EPHEMERAL)


def test_parse_port_range() -> None:
    assert parse_port_range("32768\t60999\n") == (32768, 60999)


# --- interface ---


def test_parse_recorded_route_tables() -> None:
    routes = parse_proc_route((DATA / "proc_net_route_host.txt").read_text())
    assert routes[0].iface == "eth0"
    assert routes[0].mask == 0
    assert parse_proc_route((DATA / "proc_net_route_no_default.txt").read_text()) == []
    assert parse_proc_route("Iface\tDestination\nbroken line\n") == []


def test_route_to_the_master_not_the_default() -> None:
    routes = parse_proc_route((DATA / "proc_net_route_two_nics.txt").read_text())
    assert route_interface("10.77.2.5", routes) == "sgt1"  # connected subnet on the non-default NIC
    assert route_interface("10.77.2.1", routes) == "sgt1"  # our own address: the NIC others reach us on
    assert route_interface("8.8.8.8", routes) == "sgt0"  # the default route
    assert route_interface("10.78.3.4", routes) == "sgt0"  # same prefix twice: the lower metric
    assert route_interface("127.0.0.1", routes) == "lo"
    assert route_interface("::1", routes) is None  # IPv6: left to the fallback


def test_no_default_route_gives_none() -> None:
    routes = parse_proc_route((DATA / "proc_net_route_no_default.txt").read_text())
    assert route_interface("10.1.2.3", routes) is None
    assert route_interface("127.0.0.1", routes) == "lo"


IFACES = ["docker0", "eth0", "eth1", "ib0", "lo"]


@pytest.mark.parametrize(
    ("value", "selected"),
    [
        ("eth", ["eth0", "eth1"]),
        ("=eth0", ["eth0"]),
        ("^docker,lo", ["eth0", "eth1", "ib0"]),
        ("^=eth0", ["docker0", "eth1", "ib0", "lo"]),
        ("ib,eth1", ["eth1", "ib0"]),
        ("mlx", []),
    ],
)
def test_nccl_matching_rules(value: str, selected: list[str]) -> None:
    assert nccl_matches(value, IFACES) == selected


def test_detected_interface_is_written_in_each_syntax() -> None:
    choice = choose_ifnames(None, None, "eth1", "route to 10.0.0.1", IFACES)
    assert (choice.nccl, choice.gloo, choice.interface) == ("=eth1", "eth1", "eth1")
    assert choice.warnings == ()


def test_user_values_are_respected() -> None:
    choice = choose_ifnames("ib0", "eth0", "eth1", "route", IFACES)
    assert (choice.nccl, choice.gloo, choice.interface) == ("ib0", "eth0", "eth0")


def test_nccl_list_syntax_is_not_copied_to_gloo() -> None:
    """aws-do-eks #51: Gloo cannot read `^docker,lo`; it gets the detected concrete name."""
    choice = choose_ifnames("^docker,lo", None, "eth1", "route", IFACES)
    assert (choice.nccl, choice.gloo) == ("^docker,lo", "eth1")


def test_a_single_nccl_name_is_copied_to_gloo() -> None:
    assert choose_ifnames("=ib0", None, "eth1", "route", IFACES).gloo == "ib0"
    assert choose_ifnames("eth0", None, "eth1", "route", IFACES).gloo == "eth0"
    assert choose_ifnames("eth", None, "eth1", "route", IFACES).gloo == "eth1"  # a prefix, not a name


def test_gloo_only_is_mirrored_to_nccl_exactly() -> None:
    choice = choose_ifnames(None, "ib0", "eth1", "route", IFACES)
    assert choice.nccl == "=ib0"


def test_nothing_detected_leaves_both_unset_and_warns() -> None:
    choice = choose_ifnames(None, None, None, "none", IFACES)
    assert (choice.nccl, choice.gloo, choice.interface) == (None, None, None)
    assert "no interface routes" in choice.warnings[0]


def test_values_naming_no_interface_warn() -> None:
    choice = choose_ifnames("mlx", "ib7", None, "none", IFACES)
    assert any("GLOO_SOCKET_IFNAME=ib7 names no interface" in w for w in choice.warnings)
    assert any("NCCL_SOCKET_IFNAME=mlx selects no interface" in w for w in choice.warnings)


# --- the whole preparation ---

SRUN_2x2 = {
    "SLURM_JOB_ID": "1042",
    "SLURM_PROCID": "3",
    "SLURM_LOCALID": "1",
    "SLURM_NTASKS": "4",
    "SLURM_NODEID": "1",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_STEP_NODELIST": "node[1-2]",
    "SLURM_JOB_NODELIST": "node[1-2]",
    contract.PORT: "20000",
    contract.PORT_RANGE: "100",
}


def test_prepare_srun_task() -> None:
    prepared = prepare(JobContext.from_environ(SRUN_2x2), fake_host())
    assert prepared.updates == {
        "MASTER_ADDR": "node1",
        "MASTER_PORT": "20042",
        "NCCL_SOCKET_IFNAME": "=sgt1",
        "GLOO_SOCKET_IFNAME": "sgt1",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
    }
    assert prepared.master_ip == "10.77.2.5"
    assert prepared.ifnames.source == "route to 10.77.2.5"
    assert prepared.warnings == ()


def test_prepare_keeps_everything_already_set() -> None:
    env = {
        **SRUN_2x2,
        "MASTER_ADDR": "node2",
        "MASTER_PORT": "29500",
        "GLOO_SOCKET_IFNAME": "sgt0",
        "NCCL_SOCKET_IFNAME": "^lo",
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
    }
    assert prepare(JobContext.from_environ(env), fake_host()).updates == {}
    assert prepare(JobContext.from_environ(env), fake_host()).master_ip == "10.77.2.6"


def test_prepare_torchrun_agent_leaves_ranks_to_torchrun() -> None:
    updates = prepare(JobContext.from_environ(SRUN_2x2), fake_host(), agent=True).updates
    assert "RANK" not in updates
    assert "WORLD_SIZE" not in updates
    assert updates["MASTER_ADDR"] == "node1"


def test_prepare_falls_back_to_ifcfg_default_then_to_nothing() -> None:
    env = {**SRUN_2x2, "MASTER_ADDR": "10.9.9.9"}
    prepared = prepare(JobContext.from_environ(env), fake_host(routes="proc_net_route_no_default.txt", default="eth7"))
    assert prepared.updates["GLOO_SOCKET_IFNAME"] == "eth7"
    assert prepared.ifnames.source == "default route (ifcfg)"
    prepared = prepare(JobContext.from_environ(env), fake_host(routes="proc_net_route_no_default.txt", default=None))
    assert "GLOO_SOCKET_IFNAME" not in prepared.updates
    assert "NCCL_SOCKET_IFNAME" not in prepared.updates
    assert prepared.warnings


def test_prepare_warns_when_async_error_handling_is_off() -> None:
    prepared = prepare(JobContext.from_environ({**SRUN_2x2, "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}), fake_host())
    assert any("TORCH_NCCL_ASYNC_ERROR_HANDLING=0" in w for w in prepared.warnings)
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in prepared.updates


def test_prepare_tells_accelerate_to_use_the_cpu_only_in_a_job_without_gpus() -> None:
    cpu_job = {**SRUN_2x2, contract.GPUS_PER_NODE: "0"}
    assert prepare(JobContext.from_environ(cpu_job), fake_host()).updates["ACCELERATE_USE_CPU"] == "true"
    assert (
        "ACCELERATE_USE_CPU"
        not in prepare(JobContext.from_environ({**SRUN_2x2, contract.GPUS_PER_NODE: "8"}), fake_host()).updates
    )
    assert (
        "ACCELERATE_USE_CPU" not in prepare(JobContext.from_environ(SRUN_2x2), fake_host()).updates
    )  # not a rendered job
    assert (
        "ACCELERATE_USE_CPU"
        not in prepare(JobContext.from_environ({**cpu_job, "ACCELERATE_USE_CPU": "false"}), fake_host()).updates
    )
    # GPUs asked for in sbatch: (gpus-per-task) leave gpus_per_node at 0, but Slurm gave the task GPUs: not a CPU job
    for given in ({"SLURM_GPUS_ON_NODE": "4"}, {"CUDA_VISIBLE_DEVICES": "0,1"}):
        assert "ACCELERATE_USE_CPU" not in prepare(JobContext.from_environ({**cpu_job, **given}), fake_host()).updates
    for none in ({"SLURM_GPUS_ON_NODE": "0"}, {"CUDA_VISIBLE_DEVICES": ""}, {"CUDA_VISIBLE_DEVICES": "NoDevFiles"}):
        assert (
            prepare(JobContext.from_environ({**cpu_job, **none}), fake_host()).updates["ACCELERATE_USE_CPU"] == "true"
        )


def test_prepare_empty_variables_count_as_unset() -> None:
    prepared = prepare(
        JobContext.from_environ({**SRUN_2x2, "GLOO_SOCKET_IFNAME": "", "NCCL_SOCKET_IFNAME": ""}), fake_host()
    )
    assert prepared.updates["GLOO_SOCKET_IFNAME"] == "sgt1"


def test_default_host_reads_this_machine() -> None:
    host = Host()
    low, high = host.ephemeral_range()
    assert 0 < low <= high < 65536
    assert "lo" in host.interfaces()
    assert host.resolve("127.0.0.1") == "127.0.0.1"
    assert replace(host, hostname=lambda: "x").hostname() == "x"
