"""The timeline's colours are told apart by a person with any common colour-vision deficiency: each colour is
simulated for protanopia, deuteranopia and tritanopia with the matrices of Machado, Oliveira and Fernandes, "A
Physiologically-based Model for Simulation of Color Vision Deficiency" (IEEE TVCG 15(6), 2009; severity 1.0, applied
to linear RGB), converted to CIELAB (D65), and every pair of bucket colours, and of marker colours, must differ by
at least MIN_DELTA_E (CIE76) in normal vision and in each simulation."""

from __future__ import annotations

import itertools

import pytest

from slurmgen.goodput import html

Matrix = tuple[tuple[float, float, float], tuple[float, float, float], tuple[float, float, float]]
Lab = tuple[float, float, float]

MACHADO: dict[str, Matrix] = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.303900)),
}
IDENTITY: Matrix = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
VISIONS = {"normal": IDENTITY, **MACHADO}
MIN_DELTA_E = 20.0  # CIE76; about 2.3 is a just-noticeable difference, 20 a plain one at a glance in a thin bar


def linear(channel: int) -> float:
    """sRGB's transfer function undone (IEC 61966-2-1)."""
    c = channel / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def lab(colour: str, vision: Matrix) -> Lab:
    rgb = [linear(int(colour[k : k + 2], 16)) for k in (1, 3, 5)]
    r, g, b = (min(max(sum(row[j] * rgb[j] for j in range(3)), 0.0), 1.0) for row in vision)
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def delta_e(a: str, b: str, vision: Matrix) -> float:
    return float(sum((p - q) ** 2 for p, q in zip(lab(a, vision), lab(b, vision), strict=True)) ** 0.5)


def closest(colours: dict[str, str]) -> tuple[float, str, str, str]:
    """The least distance between two of the colours over every vision: (delta E, name, name, vision)."""
    return min(
        (delta_e(colours[a], colours[b], matrix), a, b, vision)
        for (a, b), (vision, matrix) in itertools.product(itertools.combinations(colours, 2), VISIONS.items())
    )


@pytest.mark.parametrize("palette", ["buckets", "markers"])
def test_every_pair_of_colours_stays_apart_in_each_colour_vision(palette: str) -> None:
    colours = html.COLOURS if palette == "buckets" else html.MARKS
    found = closest(dict(colours))
    assert found[0] >= MIN_DELTA_E, found


def test_the_simulation_merges_a_known_confusion_pair() -> None:
    """The check can fail: the red and the green the buckets had before (redone #c62828, productive #2e7d32) are
    far apart in normal vision and close for a deuteranope, as the red-green confusion is."""
    normal, deutan = delta_e("#c62828", "#2e7d32", IDENTITY), delta_e("#c62828", "#2e7d32", MACHADO["deuteranopia"])
    assert normal > 5 * MIN_DELTA_E and deutan < MIN_DELTA_E, (normal, deutan)  # about 101 and 16
    assert lab("#ffffff", MACHADO["protanopia"])[0] == pytest.approx(100, abs=0.5)  # white stays white
