"""Resubmitting points of a sweep: a new array of just those points, run by the first submission's own script
(its `case` table holds every point's values), so a point reruns with the same values even if the spec file has
changed since. Pure apart from reading the first submission's run directory.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from slurmgen.errors import UsageError
from slurmgen.journal import new_token
from slurmgen.submission.plan import SCRIPT_NAME, SPEC_COPY, plan
from slurmgen.submission.sweep_plan import SweepPlan, sweep_plan
from slurmgen.submission.sweep_record import SweepRecord


def plan_again(record: SweepRecord, indexes: list[int], max_array_size: int) -> SweepPlan:
    from slurmgen.spec.load import load_text

    first = record.first
    run_dir = Path(first.run_dir)
    resolved = record.resolved
    try:
        script = (run_dir / SCRIPT_NAME).read_text(encoding="utf-8")
        text = (run_dir / SPEC_COPY).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the first submission of sweep {record.sweep_id} in {run_dir}: {exc}") from None
    overrides = [str(o) for o in resolved.get("overrides", [])]  # type: ignore[attr-defined]
    args = tuple(str(a) for a in resolved.get("args", []))  # type: ignore[attr-defined]
    spec = load_text(text, str(resolved.get("source", first.spec)), overrides, args=args).spec
    submit_dir = Path(str(resolved.get("submit_dir", run_dir)))
    p = plan(Path(first.spec), spec, script, run_dir.parents[2], submit_dir, new_token(), tuple(overrides),
             args=args)  # fmt: skip
    p = replace(p, run_dir=run_dir)  # the first submission's script and spec copy: the same values
    return sweep_plan(p, max_array_size, indexes, sweep_id=record.sweep_id, attempt=record.attempts)
