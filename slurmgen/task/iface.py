"""Which network interface NCCL and Gloo should use: the one that routes to the master address.

The default-route interface (what ifcfg and habitat use) may be a management NIC, a tunnel or a docker bridge
(ray #42652, nccl #1837); the interface the kernel would use to reach the master is the one every rank can
talk on. The route is looked up in /proc/net/route (longest prefix, then lowest metric), which needs no
subprocess. ifcfg's default-route interface is only the fallback, and it returns None when there is no default
route (ifcfg parses `route -n` and needs a `0.0.0.0 ... UG` line; WGDashboard #373), so it is never indexed
blindly.

The two libraries read different syntaxes (aws-do-eks #51, nccl-tests #9): NCCL_SOCKET_IFNAME takes a
comma list of prefixes, ``^`` to exclude and ``=`` for exact names; GLOO_SOCKET_IFNAME takes concrete names.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from slurmgen import contract

_RTF_UP = 0x1


@dataclass(frozen=True)
class Route:
    iface: str
    destination: int  # host byte order
    mask: int
    metric: int
    flags: int


def parse_proc_route(text: str) -> list[Route]:
    """Parse /proc/net/route (addresses are little-endian hex). Malformed lines are skipped."""
    routes: list[Route] = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            dest, flags, metric, mask = (
                int(fields[1], 16),
                int(fields[3], 16),
                int(fields[6]),
                int(fields[7], 16),
            )
        except ValueError:
            continue
        routes.append(Route(fields[0], _swap32(dest), _swap32(mask), metric, flags))
    return routes


def _swap32(value: int) -> int:
    return int.from_bytes(value.to_bytes(4, "little"), "big")


def route_interface(ip: str, routes: Iterable[Route], loopback: str = "lo") -> str | None:
    """The interface the main routing table uses to reach IPv4 ``ip``; ``loopback`` for 127.0.0.0/8.

    Loopback and this host's own addresses live in the kernel's *local* table, which /proc/net/route does not
    show; an own address still matches its connected subnet here, which is the interface others reach us on.
    None for IPv6 or when nothing routes there.
    """
    address = ipaddress.ip_address(ip)
    if address.version != 4:
        return None
    if address.is_loopback:
        return loopback
    target = int(address)
    best: Route | None = None
    for route in routes:
        if not route.flags & _RTF_UP or target & route.mask != route.destination & route.mask:
            continue
        if best is None or (route.mask, -route.metric) > (best.mask, -best.metric):
            best = route
    return None if best is None else best.iface


@dataclass(frozen=True)
class IfChoice:
    nccl: str | None  # value for NCCL_SOCKET_IFNAME (None: leave unset)
    gloo: str | None  # value for GLOO_SOCKET_IFNAME (None: leave unset)
    interface: str | None  # the concrete interface in use, for diagnostics
    source: str
    warnings: tuple[str, ...]


def _single_name(nccl_value: str) -> str | None:
    """``"eth0"`` or ``"=eth0"`` -> ``"eth0"``; a list, an exclusion or a prefix list -> None."""
    name = nccl_value[1:] if nccl_value.startswith("=") else nccl_value
    return None if not name or name.startswith("^") or "," in name else name


def nccl_matches(value: str, interfaces: Iterable[str]) -> list[str]:
    """The interfaces an NCCL_SOCKET_IFNAME value selects (NCCL's ``^``, ``=`` and prefix rules)."""
    exclude = value.startswith("^")
    spec = value[1:] if exclude else value
    exact = spec.startswith("=")
    names = [n for n in (spec[1:] if exact else spec).split(",") if n]

    def hit(iface: str) -> bool:
        return any(iface == n if exact else iface.startswith(n) for n in names)

    return [i for i in interfaces if hit(i) != exclude]


def choose_ifnames(
    nccl_user: str | None, gloo_user: str | None, detected: str | None, source: str, interfaces: list[str]
) -> IfChoice:
    """Decide both variables. A user's value is kept as is; a detected name is written in each syntax."""
    warnings: list[str] = []
    nccl_user = nccl_user or None
    gloo_user = gloo_user or None
    for name in (gloo_user or "").split(","):
        if name and name not in interfaces:
            warnings.append(
                f"{contract.GLOO_SOCKET_IFNAME}={gloo_user} names no interface here "
                f"(interfaces: {', '.join(interfaces)})"
            )
    if nccl_user and not nccl_matches(nccl_user, interfaces):
        warnings.append(
            f"{contract.NCCL_SOCKET_IFNAME}={nccl_user} selects no interface here (interfaces: {', '.join(interfaces)})"
        )
    nccl_single = _single_name(nccl_user) if nccl_user else None
    gloo: str | None
    interface: str | None
    if gloo_user:
        gloo, interface, source = gloo_user, gloo_user.split(",")[0], contract.GLOO_SOCKET_IFNAME
    elif nccl_single and nccl_single in interfaces:
        gloo, interface, source = nccl_single, nccl_single, contract.NCCL_SOCKET_IFNAME
    else:
        # A list or exclusion in NCCL_SOCKET_IFNAME is not valid for Gloo: detect a concrete name instead.
        gloo, interface = detected, detected
    nccl: str | None
    if nccl_user:
        nccl = nccl_user
    elif gloo_user and "," not in gloo_user:
        nccl = "=" + gloo_user
    else:
        nccl = None if detected is None else "=" + detected  # "=": exact name, not a prefix
    if interface is None:
        warnings.append(
            "no interface routes to the master address and there is no default route; "
            "the unset *_SOCKET_IFNAME variables are left to NCCL's and Gloo's own choice"
        )
    return IfChoice(nccl, gloo, interface, source if interface else "none", tuple(warnings))
