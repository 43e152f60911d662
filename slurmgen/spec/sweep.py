"""The spec field `sweep:`: parameters, the points they make, and `{name}` placeholders in command and env.

The points of a sweep, in this order (the order fixes each point's index, which is stable for a given spec):
1. `points:` as written;
2. then the cartesian product of `grid:`, in the order the names are written, the last name varying fastest;
3. then `random.n` samples of `random.params`, drawn with `random.seed` (the same seed gives the same points).
Every point must give a value to the same parameter names. Pure: no effects, no randomness without the seed.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import TYPE_CHECKING, Any

from slurmgen import variables
from slurmgen.spec.types import BAD, Ctx, Type, bad_char
from slurmgen.spec.yaml_source import FieldPath

if TYPE_CHECKING:
    from slurmgen.spec.sweep_points import Value

MAX_POINTS = 100_000  # the script's size limits a sweep first (slurmgen.submission.sweep_plan.MAX_SCRIPT_BYTES)
DISTRIBUTIONS = ("choice", "uniform", "loguniform", "randint")
KEYS = ("grid", "points", "random", "max_parallel")


def check_uses(f: dict[str, Any], ctx: Ctx) -> None:
    """Every placeholder in command and env names a parameter, and every parameter is used somewhere."""
    sweep = f.get("sweep")
    if sweep is None:
        return
    from slurmgen.spec.sweep_points import Placeholder, split_template  # the points' module: only for a sweep

    params: tuple[str, ...] = sweep["params"]
    if f.get("array") is not None:
        ctx.fail(("array",), "a sweep makes its own job arrays; remove array (sweep.max_parallel sets the % limit)")
    used: set[str] = set()
    places: list[tuple[FieldPath, str]] = [(("command", i), word) for i, word in enumerate(f["command"])]
    places += [(("env", name), value) for name, value in f["env"].items()]
    for path, text in places:
        try:
            # A placeholder lives in the value's plain text: never inside a `${NAME}` or a `$${...}` literal.
            chunks = variables.literal_text(variables.split(text))
            parts = [part for chunk in chunks for part in split_template(chunk)]
        except ValueError as exc:
            ctx.fail(path, str(exc))
            continue
        for part in parts:
            if isinstance(part, Placeholder):
                used.add(part.name)
                if part.name not in params:
                    known = ", ".join(params)
                    ctx.fail(path, f"unknown placeholder {{{part.name}}}; the sweep's parameters are {known}")
    for name in params:
        if name not in used:
            where = sweep["where"].get(name, ("sweep",))
            ctx.fail(where, f"sweep parameter {name!r} is used nowhere; put {{{name}}} in command or an env value")


# --- the field ------------------------------------------------------------------------------------------------


def _value(value: Any, ctx: Ctx, path: FieldPath) -> Value | None:
    if isinstance(value, bool | int | str) or (isinstance(value, float) and math.isfinite(value)):
        if isinstance(value, str) and any(ord(c) < 32 for c in value):
            ctx.fail(path, "contains a control character or newline; remove it")
            return None
        if isinstance(value, str) and (problem := bad_char(value)):
            ctx.fail(path, f"contains {problem}; remove it")
            return None
        return value
    ctx.fail(path, f"expected a text, number or true/false value, got {type(value).__name__} {value!r}")
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class SweepType(Type):
    """`sweep: {grid, points, random, max_parallel}` checked into {"params", "points", "max_parallel", "where"}."""

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if not isinstance(value, dict):
            return self.wrong(value, ctx, path, "a mapping with grid, points, random and/or max_parallel")
        before = len(ctx.problems)
        for key in value:
            if key not in KEYS:
                ctx.fail((*path, key), f"unknown key; known keys: {', '.join(KEYS)}")
        rows: list[dict[str, Value]] = []
        where: dict[str, FieldPath] = {}
        rows += self._points(value.get("points"), ctx, (*path, "points"), where)
        rows += self._grid(value.get("grid"), ctx, (*path, "grid"), where)
        rows += self._random(value.get("random"), ctx, (*path, "random"), where)
        limit = value.get("max_parallel")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            ctx.fail((*path, "max_parallel"), f"must be a whole number of at least 1, got {limit!r}")
        if len(ctx.problems) > before:
            return BAD
        if not rows:
            return ctx.fail(path, "has no points; give grid, points or random")
        if len(rows) > MAX_POINTS:
            return ctx.fail(path, f"has {len(rows)} points; the limit is {MAX_POINTS}")
        params = tuple(dict.fromkeys(name for row in rows for name in row))
        for i, row in enumerate(rows):
            missing = [p for p in params if p not in row]
            if missing:
                return ctx.fail(path, f"point {i} ({row}) gives no value for {', '.join(missing)}; every point "
                                f"needs every parameter (see docs/sweeps.md)")  # fmt: skip
        points = tuple(tuple(row[p] for p in params) for row in rows)
        return {"params": params, "points": points, "max_parallel": limit, "where": where}

    def _points(self, value: Any, ctx: Ctx, path: FieldPath, where: dict[str, FieldPath]) -> list[dict[str, Value]]:
        if value is None:
            return []
        if not isinstance(value, list) or not value:
            ctx.fail(path, "expected a non-empty list of mappings, e.g. [{lr: 0.1, seed: 1}]")
            return []
        rows = []
        for i, item in enumerate(value):
            if not isinstance(item, dict) or not item:
                ctx.fail((*path, i), "expected a mapping of parameter names to values, e.g. {lr: 0.1}")
                continue
            row = {}
            for name, v in item.items():
                if self._name(name, ctx, (*path, i, name)):
                    where.setdefault(name, (*path, i, name))
                    checked = _value(v, ctx, (*path, i, name))
                    if checked is not None:
                        row[name] = checked
            rows.append(row)
        return rows

    def _grid(self, value: Any, ctx: Ctx, path: FieldPath, where: dict[str, FieldPath]) -> list[dict[str, Value]]:
        if value is None:
            return []
        if not isinstance(value, dict) or not value:
            ctx.fail(path, "expected a mapping of parameter names to lists of values, e.g. {lr: [0.1, 0.01]}")
            return []
        axes: dict[str, list[Value]] = {}
        for name, values in value.items():
            if not self._name(name, ctx, (*path, name)):
                continue
            where.setdefault(name, (*path, name))
            if not isinstance(values, list) or not values:
                ctx.fail((*path, name), f"expected a non-empty list of values, e.g. {name}: [1, 2]")
                continue
            checked = [_value(v, ctx, (*path, name, i)) for i, v in enumerate(values)]
            axes[name] = [v for v in checked if v is not None]
        total = math.prod(len(v) for v in axes.values())
        if total > MAX_POINTS:
            ctx.fail(path, f"makes {total} points; the limit is {MAX_POINTS}")
            return []
        names = list(axes)
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes.values())]

    def _random(self, value: Any, ctx: Ctx, path: FieldPath, where: dict[str, FieldPath]) -> list[dict[str, Value]]:
        if value is None:
            return []
        if not isinstance(value, dict):
            ctx.fail(path, "expected a mapping: {n: 20, seed: 0, params: {lr: {loguniform: [1e-5, 1e-2]}}}")
            return []
        for key in value:
            if key not in ("n", "seed", "params"):
                ctx.fail((*path, key), "unknown key; known keys: n, seed, params")
        n, seed, params = value.get("n"), value.get("seed"), value.get("params")
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_POINTS:
            ctx.fail((*path, "n"), f"is required: the number of points to draw (1 to {MAX_POINTS}), got {n!r}")
        if not isinstance(seed, int) or isinstance(seed, bool):
            ctx.fail(
                (*path, "seed"), f"is required: a whole number, so the same spec draws the same points; got {seed!r}"
            )
        if not isinstance(params, dict) or not params:
            ctx.fail((*path, "params"), "expected a mapping of names to distributions, e.g. {lr: {uniform: [0, 1]}}")
            return []
        draws: dict[str, tuple[str, list[Any]]] = {}
        for name, dist in params.items():
            here = (*path, "params", name)
            if not self._name(name, ctx, here):
                continue
            where.setdefault(name, here)
            kind, args = next(iter(dist.items())) if isinstance(dist, dict) and len(dist) == 1 else (None, None)
            if kind not in DISTRIBUTIONS or not isinstance(args, list):
                ctx.fail(
                    here, f"expected one of {{{': [...]}, {'.join(DISTRIBUTIONS)}: [...]}}, e.g. {{uniform: [0, 1]}}"
                )
                continue
            if kind == "choice":
                checked = [_value(v, ctx, (*here, kind, i)) for i, v in enumerate(args)]
                if not args or None in checked:
                    ctx.fail(here, "choice needs a non-empty list of values")
                    continue
            elif len(args) != 2 or not all(_number(a) for a in args) or not args[0] < args[1]:
                ctx.fail(here, f"{kind} needs [low, high] with low < high, got {args!r}")
                continue
            elif kind == "loguniform" and args[0] <= 0:
                ctx.fail(here, f"loguniform needs low > 0, got {args[0]!r}")
                continue
            elif kind == "randint" and not all(isinstance(a, int) for a in args):
                ctx.fail(here, f"randint needs whole numbers [low, high], got {args!r}")
                continue
            draws[name] = (kind, list(args))
        if not isinstance(n, int) or not isinstance(seed, int) or len(draws) != len(params):
            return []
        return sample(draws, n, seed)

    @staticmethod
    def _name(name: Any, ctx: Ctx, path: FieldPath) -> bool:
        from slurmgen.spec.sweep_points import PARAM

        if isinstance(name, str) and re.fullmatch(PARAM, name):
            return True
        ctx.fail(path, f"{name!r} is not a parameter name (letters, digits and _, not starting with a digit)")
        return False

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "grid": {"type": "object", "additionalProperties": {"type": "array", "minItems": 1}},
                "points": {"type": "array", "items": {"type": "object"}, "minItems": 1},
                "random": {"type": "object", "required": ["n", "seed", "params"]},
                "max_parallel": {"type": "integer", "minimum": 1},
            },
            "additionalProperties": False,
        }

    def model_type(self) -> str:
        return "SweepSpec"

    def build(self, value: Any) -> Any:
        if value is None:
            return None
        from slurmgen.spec.sweep_points import SweepSpec

        return SweepSpec(value["params"], value["points"], value["max_parallel"])  # "where" serves the checks only


def sample(draws: dict[str, tuple[str, list[Any]]], n: int, seed: int) -> list[dict[str, Value]]:
    """n points drawn with Python's Mersenne Twister seeded with ``seed`` (the same on every platform). Floats
    are rounded to 6 significant digits so that values read well in commands and tables."""
    import random

    rng = random.Random(seed)  # noqa: S311 - reproducible sampling, not secrets
    rows = []
    for _ in range(n):
        row: dict[str, Value] = {}
        for name, (kind, args) in draws.items():
            if kind == "choice":
                row[name] = args[rng.randrange(len(args))]
            elif kind == "randint":
                row[name] = rng.randint(args[0], args[1])
            elif kind == "uniform":
                row[name] = float(f"{rng.uniform(args[0], args[1]):.6g}")
            else:
                low, high = math.log(args[0]), math.log(args[1])
                row[name] = float(f"{math.exp(rng.uniform(low, high)):.6g}")
        rows.append(row)
    return rows
