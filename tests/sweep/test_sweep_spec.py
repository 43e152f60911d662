"""The spec field sweep: the points and their order, reproducible sampling, and placeholder errors that name
the file, the line and the field."""

from __future__ import annotations

import pytest

from slurmgen.cli.app import main
from slurmgen.errors import SpecError
from slurmgen.spec.load import load_text
from slurmgen.spec.model import JobSpec
from slurmgen.spec.sweep_points import fill, split_template

HEAD = "name: sw\ntime: '10'\n"


def spec(text: str) -> JobSpec:
    return load_text(HEAD + text, "sw.yaml").spec


def errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_text(HEAD + text, "sw.yaml")
    return [str(p) for p in caught.value.problems]


def test_points_then_grid_last_name_fastest_then_random() -> None:
    s = spec(
        "command: [run, '--lr={lr}', '--seed={seed}']\n"
        "sweep:\n"
        "  points: [{lr: 0.5, seed: 9}]\n"
        "  grid: {lr: [0.1, 0.01], seed: [1, 2]}\n"
        "  random: {n: 2, seed: 7, params: {lr: {loguniform: [1.0e-5, 1.0e-2]}, seed: {randint: [0, 99]}}}\n"
        "  max_parallel: 3\n"
    )
    assert s.sweep is not None
    assert s.sweep.params == ("lr", "seed")
    assert s.sweep.points[:5] == ((0.5, 9), (0.1, 1), (0.1, 2), (0.01, 1), (0.01, 2))
    drawn = s.sweep.points[5:]
    assert len(drawn) == 2
    assert all(isinstance(lr, float) and 1e-5 <= lr <= 1e-2 for lr, _ in drawn)
    assert all(isinstance(seed, int) and 0 <= seed <= 99 for _, seed in drawn)
    again = spec(
        "command: [run, '--lr={lr}', '--seed={seed}']\n"
        "sweep:\n"
        "  random: {n: 2, seed: 7, params: {lr: {loguniform: [1.0e-5, 1.0e-2]}, seed: {randint: [0, 99]}}}\n"
    )
    assert again.sweep is not None and again.sweep.points == drawn  # the same seed draws the same points
    assert s.sweep.max_parallel == 3
    assert s.sweep.shown(1) == "lr=0.1 seed=1"
    assert s.sweep.params_json(0) == '{"lr":0.5,"seed":9}'


def test_choice_and_uniform_and_values_in_text() -> None:
    s = spec(
        "command: 'train --opt={opt} --wd={wd} --flag={on}'\n"
        "sweep:\n"
        "  points: [{opt: adam, wd: 0.5, on: true}]\n"
        "  random: {n: 20, seed: 1, params: {opt: {choice: [adam, sgd]}, wd: {uniform: [0, 1]}, "
        "on: {choice: [false]}}}\n"
    )
    assert s.sweep is not None and len(s.sweep.points) == 21
    assert {p[0] for p in s.sweep.points[1:]} == {"adam", "sgd"}
    assert all(isinstance(p[1], float) and 0 <= p[1] <= 1 for p in s.sweep.points[1:])
    assert s.sweep.values(0) == {"opt": "adam", "wd": 0.5, "on": True}
    assert fill("--flag={on} {{literal}}", s.sweep.values(0)) == "--flag=true {literal}"
    assert errors("command: [x, '{a}', '{b}']\nsweep:\n  points: [{a: 1}, {b: 2}]\n") == [
        "sw.yaml:5: sweep: point 0 ({'a': 1}) gives no value for b; every point needs every parameter (see "
        "docs/sweeps.md)"
    ]


def test_no_sweep_keeps_every_brace_and_the_digest() -> None:
    plain = spec("command: [python, -c, 'print({})']\n")
    assert plain.command == ("python", "-c", "print({})")
    assert "sweep" not in plain.to_dict()


def test_split_template() -> None:
    assert split_template("--lr={lr}/{{x}}") == ["--lr=", split_template("{lr}")[0], "/{x}"]
    with pytest.raises(ValueError, match=r"lone `\{`"):
        split_template("a{b")
    with pytest.raises(ValueError, match="not a placeholder"):
        split_template("{a b}")


def test_placeholder_errors_name_file_line_and_field() -> None:
    problems = errors(
        "command: [run, '--lr={lr}', '--seed={sed}', 'x}']\n"
        "env:\n"
        "  TAG: 'a{b'\n"
        "sweep:\n"
        "  grid:\n"
        "    lr: [1, 2]\n"
        "    seed: [1]\n"
    )
    assert problems == [
        "sw.yaml:3: command[2]: unknown placeholder {sed}; the sweep's parameters are lr, seed",
        "sw.yaml:3: command[3]: has a lone `}` in 'x}'; write `}}` for a literal brace",
        "sw.yaml:5: env.TAG: has a lone `{` in 'a{b'; write `{{` for a literal brace",
        "sw.yaml:9: sweep.grid.seed: sweep parameter 'seed' is used nowhere; put {seed} in command or an env value",
    ]


def test_sweep_field_errors() -> None:
    assert errors("command: [run, '{a}']\nsweep: {grid: {a: []}, max_parallel: 0, typo: 1}\n") == [
        "sw.yaml:4: sweep.typo: unknown key; known keys: grid, points, random, max_parallel",
        "sw.yaml:4: sweep.grid.a: expected a non-empty list of values, e.g. a: [1, 2]",
        "sw.yaml:4: sweep.max_parallel: must be a whole number of at least 1, got 0",
    ]
    assert errors("command: [run, '{a}']\nsweep: {random: {n: 2, params: {a: {normal: [0, 1]}}}}\n") == [
        "sw.yaml:4: sweep.random.seed: is required: a whole number, so the same spec draws the same points; got None",
        "sw.yaml:4: sweep.random.params.a: expected one of {choice: [...]}, {uniform: [...]}, {loguniform: [...]}, "
        "{randint: [...]}, e.g. {uniform: [0, 1]}",
    ]
    assert errors("command: [run, '{a}']\narray: 0-3\nsweep: {grid: {a: [1]}}\n") == [
        "sw.yaml:4: array: a sweep makes its own job arrays; remove array (sweep.max_parallel sets the % limit)"
    ]


def test_cli_refuses_a_bad_placeholder_with_exit_2(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "sw.yaml"
    path.write_text(HEAD + "command: [run, '{lr}']\nsweep: {grid: {rate: [1]}}\n")
    target = tmp_path / "out.sh"
    assert main(["render", str(path), "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}:3: command[1]: unknown placeholder {{lr}}; the sweep's parameters are rate" in err
    assert not target.exists()
