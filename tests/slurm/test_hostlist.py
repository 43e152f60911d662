"""expand_hostlist against Slurm's grammar (src/common/hostlist.c; outputs observed with scontrol 22.05); the scontrol
oracle is in test_runtime_cluster.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmgen.errors import RuntimeSetupError
from slurmgen.slurm.hostlist import HostlistError, expand_hostlist

# (expression, expansion): the rows of the observed table that scontrol 22.05.8 accepts, plus the suffix
# form that Slurm accepts since 23.11.
CASES = [
    ("gpu-[01-03,07],cpu[1-2]", ["gpu-01", "gpu-02", "gpu-03", "gpu-07", "cpu1", "cpu2"]),
    ("node[1-2]-ib[0-1]", ["node1-ib0", "node1-ib1", "node2-ib0", "node2-ib1"]),
    ("rack[1-2]n[001-002]", ["rack1n001", "rack1n002", "rack2n001", "rack2n002"]),
    # Three groups: the last varies fastest, the others in reverse order (Slurm's recursion on the prefix).
    ("x[0-1]y[5-6]z[7-8]", ["x0y5z7", "x0y5z8", "x1y5z7", "x1y5z8", "x0y6z7", "x0y6z8", "x1y6z7", "x1y6z8"]),
    ("n[07-09]-gpu[1-2]", ["n07-gpu1", "n07-gpu2", "n08-gpu1", "n08-gpu2", "n09-gpu1", "n09-gpu2"]),
    ("node[1-2]-ib", ["node1-ib", "node2-ib"]),
    ("a[8-10]", ["a8", "a9", "a10"]),
    ("n[01-2]", ["n01", "n02"]),
    ("n[1-02]", ["n1", "n2"]),
    ("host[5-9,1]", ["host5", "host6", "host7", "host8", "host9", "host1"]),
    ("a[1,1]", ["a1", "a1"]),
    ("alpha,beta gamma", ["alpha", "beta", "gamma"]),
    ("alpha\tbeta\ngamma", ["alpha", "beta", "gamma"]),
    ("linux[1,2]", ["linux1", "linux2"]),
    ("nodeA,nodeB[001,003],nodeC", ["nodeA", "nodeB001", "nodeB003", "nodeC"]),
    ("my-node-1", ["my-node-1"]),
    ("gpu", ["gpu"]),
    ("n[998-1001]", ["n998", "n999", "n1000", "n1001"]),
    ("n[009-011]", ["n009", "n010", "n011"]),
    ("10.0.0.[1-2]", ["10.0.0.1", "10.0.0.2"]),
    ("a,,b", ["a", "b"]),
    ("", []),
    (" , ", []),
]


@pytest.mark.parametrize(("expr", "expected"), CASES)
def test_expands_like_slurm(expr: str, expected: list[str]) -> None:
    assert expand_hostlist(expr) == expected


BAD = [
    ("n[3-1]", "decreasing"),
    ("n[-1]", "bad range"),
    ("n[1-2]x[]", "empty brackets"),
    ("n[1-", "missing ']'"),
    ("n[1-2", "missing ']'"),
    ("n1-2]", "without '['"),
    ("n[[1]]", "nested"),
    ("n[a-b]", "bad range"),
    ("n[1,,2]", "bad range"),
    ("n[1-2-3]", "bad range"),
    ("n[1 - 2]", "bad range"),
    ("n[1:4]", "bad range"),
    ("n[\u0661-\u0662]", "bad range"),  # Arabic-Indic digits: digits to str.isdigit, not to Slurm
    ("x[0-999999999].y[0-9]", "too many"),
    ("a[0-300]b[0-300]", "more than"),
]


@pytest.mark.parametrize(("expr", "problem"), BAD)
def test_malformed_raises_clearly(expr: str, problem: str) -> None:
    with pytest.raises(HostlistError) as caught:
        expand_hostlist(expr)
    message = str(caught.value)
    assert problem in message
    assert repr(expr) in message
    assert isinstance(caught.value, RuntimeSetupError)
    assert isinstance(caught.value, ValueError)


def test_cap_is_on_the_whole_expression() -> None:
    assert len(expand_hostlist("n[0-65535]")) == 65536
    with pytest.raises(HostlistError, match="more than"):
        expand_hostlist("n[0-65535],extra")


@st.composite
def bracketed(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A prefix and 1-2 bracket groups of zero-padded ranges, with the expansion built independently."""
    expr = draw(st.from_regex(r"[a-z][a-z0-9-]{0,5}", fullmatch=True))
    names = [expr]
    for _ in range(draw(st.integers(1, 2))):
        items, numbers = [], []
        for _ in range(draw(st.integers(1, 3))):
            low = draw(st.integers(0, 120))
            high = draw(st.integers(low, low + 4))
            width = draw(st.integers(len(str(low)), 4))
            items.append(f"{low:0{width}d}-{high}")
            numbers += [f"{n:0{width}d}" for n in range(low, high + 1)]
        expr += "[" + ",".join(items) + "]"
        names = [name + number for name in names for number in numbers]
        suffix = draw(st.sampled_from(["", "-ib", "x"]))
        expr, names = expr + suffix, [name + suffix for name in names]
    return expr, names


@given(st.lists(bracketed(), min_size=1, max_size=3))
def test_comma_joined_groups_expand_in_order(groups: list[tuple[str, list[str]]]) -> None:
    expr = ",".join(e for e, _ in groups)
    assert expand_hostlist(expr) == [name for _, names in groups for name in names]
