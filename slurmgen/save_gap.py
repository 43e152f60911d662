"""A program save's cost told by the program's own progress lines around it (spec sections progress: and
checkpoint:), for a save the checkpoint watch cannot see from its start to its rename: one written in place
(pytorch/examples' multinode.py: `torch.save(snapshot, "snapshot.pt")`), seen only once done or mid-write.

A program that saves between two of its steps prints the step after the save late by what the save blocked: the
gap between the progress lines around the save, beyond the usual time between two lines of as many steps, is the
save's blocking cost (its writing, and whatever it gathered first, which no look at the file sees). The usual
time is the median per-step gap between the other lines that no save falls between: a save in every gap leaves
no usual time, and no cost is told. Pure; standard library only (rank 0's supervisor imports it, on Python 3.9).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays unloaded: the supervisor imports this
if TYPE_CHECKING:
    from collections.abc import Sequence

    Line = tuple[float, int]  # (epoch seconds the line was read, the step it printed)

MIN_USUAL = 2  # gaps without a save needed to tell the usual time between two lines


def gap_cost(lines: Sequence[Line], at: float, saves: Sequence[float]) -> float | None:
    """The blocking cost of the save durable at ``at``, from the progress ``lines`` (oldest first) around it, the
    times of every save in ``saves`` kept out of the usual time; None when the lines do not tell (no line after
    it yet, or fewer than MIN_USUAL gaps without a save)."""
    pairs = [(lines[i], lines[i + 1]) for i in range(len(lines) - 1)]  # Python 3.9: no itertools.pairwise
    around = next(((a, b) for a, b in pairs if a[0] <= at < b[0]), None)
    if around is None or around[1][1] <= around[0][1]:
        return None
    usual = sorted(
        (b[0] - a[0]) / (b[1] - a[1])
        for a, b in pairs
        if (a, b) != around and b[1] > a[1] and not any(a[0] <= s < b[0] for s in saves)
    )
    if len(usual) < MIN_USUAL:
        return None
    (t0, s0), (t1, s1) = around
    return round(max(t1 - t0 - usual[len(usual) // 2] * (s1 - s0), 0.0), 3)
