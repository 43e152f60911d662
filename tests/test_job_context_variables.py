"""The contract's one table of variables (slurmgen.contract.variables()): the job context's fields and the manual's
table are what it gives, its spec paths are spec fields, every variable name of the contract is a row, a malformed
value fails only the reader that uses it, and the in-job modules read it on Python 3.9."""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import subprocess
from functools import cached_property
from pathlib import Path

import pytest

from slurmgen import contract
from slurmgen.job_context import generate
from slurmgen.job_context.context import JobContext
from slurmgen.job_context.values import Malformed
from slurmgen.script.render import contract_exports
from slurmgen.spec.fields import SPEC
from slurmgen.spec.load import load_text
from slurmgen.spec.model import JobSpec
from slurmgen.spec.types import AnyOf, Obj, Type

ROOT = Path(__file__).resolve().parent.parent
ENV_NAME = r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+"


def test_the_written_fields_and_the_manuals_table_are_what_the_table_gives() -> None:
    assert generate.main(["--check"]) == 0, "run python -m slurmgen.job_context.generate"


def test_every_row_with_a_field_is_a_field_of_the_context_and_nothing_else_is() -> None:
    fields = [f.name for f in dataclasses.fields(JobContext)]
    rows = [row.field for row in contract.variables() if row.field]
    assert fields == rows + [name for name, _, _ in generate.DERIVED] + ["environ"]


def test_every_variable_name_of_the_contract_is_one_row() -> None:
    names = {v for k, v in vars(contract).items() if isinstance(v, str) and k.isupper() and re.fullmatch(ENV_NAME, v)}
    names.add(contract.RANK)  # torch's one name without an underscore (and no signal's, as USR2 is)
    rows = [row.name for row in contract.variables()]
    assert len(rows) == len(set(rows))
    assert names == set(rows)


def _spec_field(obj: Obj, path: list[str]) -> bool:
    field = obj.fields.get(path[0])
    if field is None:
        return False
    if len(path) == 1:
        return True
    kind: Type = field.type
    options = [option for _, option in kind.options] if isinstance(kind, AnyOf) else [kind]
    return any(_spec_field(table, path[1:]) for table in options if isinstance(table, Obj))


def test_every_exported_row_comes_from_a_spec_field_or_a_value_the_model_derives() -> None:
    # spec/model.py: the spec's hash, the time limit in seconds, srun: {kill-on-bad-exit: false}
    derived = {"digest", "time_seconds", "run_on_bad_exit"}
    for row in contract.variables():
        assert bool(row.spec) == (row.set_by == contract.FROM_SPEC), row.name
        for path in filter(None, (row.spec, row.when)):
            assert path in derived or _spec_field(SPEC, path.split(".")), (row.name, path)
    model = {f.name for f in dataclasses.fields(JobSpec)} | {
        n for n, v in vars(JobSpec).items() if isinstance(v, cached_property | property)
    }
    assert derived <= model


def test_the_exports_follow_the_table_and_leave_out_what_it_says() -> None:
    spec = load_text("name: t\ncommand: [python, train.py]\ntime: '10'\npreemption: {keep: 3}\n", "t.yaml").spec
    names = [name for name, _ in contract_exports(spec)]
    order = [row.name for row in contract.variables()]
    assert names == sorted(names, key=order.index)
    assert dict(contract_exports(spec))[contract.KEEP] == "3"
    assert contract.MAX_PREEMPTIONS not in names and contract.CONTAINER not in names  # None, and no container
    off = load_text("name: t\ncommand: [python, train.py]\ntime: '10'\npreemption: false\n", "t.yaml").spec
    assert not {contract.PREEMPT_SIGNAL, contract.KEEP, contract.LEAD_TIME} & {n for n, _ in contract_exports(off)}


def test_a_malformed_number_is_kept_for_its_reader_and_fails_only_there() -> None:
    from slurmgen.errors import RuntimeSetupError
    from slurmgen.task.rendezvous import master_port

    ctx = JobContext.from_environ({contract.PORT: "80x", contract.KEEP: " 4 ", contract.PG_TIMEOUT: "1e3"})
    assert (ctx.port, ctx.port_range, ctx.keep, ctx.pg_timeout) == ("80x", 127, 4, 1000.0)
    assert isinstance(ctx.port, Malformed) and not isinstance(ctx.port_range, Malformed)
    with pytest.raises(RuntimeSetupError, match="SLURMGEN_PORT='80x' is not an integer"):
        master_port(ctx, contract.DEFAULT_EPHEMERAL)


def test_the_typed_fields_of_what_was_text() -> None:
    ctx = JobContext.from_environ(
        {
            contract.SIGNALS: "USR1@1010 TERM@x",
            contract.PREEMPT_POLL: "2.5",
            contract.ELASTIC_RESTART_COUNT: "3",
            contract.ELASTIC_SIGNALS: "SIGTERM, SIGUSR1",
        }
    )
    assert ctx.signals == (("USR1", 1010.0), ("TERM", None))
    assert (ctx.preempt_poll, ctx.elastic_restart_count, ctx.elastic_signals) == (2.5, 3, ("SIGTERM", "SIGUSR1"))
    empty = JobContext.from_environ({})
    assert (empty.signals, empty.preempt_poll, empty.elastic_restart_count) == ((), None, 0)
    assert (empty.keep, empty.port, empty.barrier_timeout) == (contract.DEFAULT_KEEP, contract.DEFAULT_PORT, 60.0)
    assert empty.elastic_signals == contract.DEFAULT_ELASTIC_SIGNALS


def test_the_in_job_modules_read_the_table_on_python_3_9() -> None:
    root = os.path.expanduser(os.environ.get("PYENV_ROOT", "~/.pyenv"))  # a pyenv tree, whose shims may be inactive
    candidates = [shutil.which("python3.9"), *sorted(glob.glob(f"{root}/versions/3.9.*/bin/python"))]
    working = [c for c in candidates if c and subprocess.run([c, "-c", "pass"], capture_output=True).returncode == 0]
    if not working:
        pytest.skip("no working python3.9 here")
    found = working[0]
    code = (
        "from slurmgen.job_context.context import JobContext\n"
        "c = JobContext.from_environ({'SLURMGEN_PORT': '9000', 'SLURMGEN_SIGNALS': 'USR1@5'})\n"
        "print(c.port, c.signals)"
    )
    done = subprocess.run([found, "-B", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["9000", "(('USR1',", "5.0),)"]
