"""`${NAME}` in spec values (slurmgen/variables.py): what is a variable, what is literal, what is refused, and how a
task expands a word. Pure functions; the whole runs are tests/local/test_local_args_variables.py."""

from __future__ import annotations

import pytest

from slurmgen import variables
from slurmgen.variables import Literal, Variable


def test_a_value_splits_into_text_variables_and_literals() -> None:
    assert variables.split("/data/${USER}/${RUN:-first}x$${KEEP}y$$z") == [
        "/data/",
        Variable("USER"),
        "/",
        Variable("RUN", "first"),
        "x",
        Literal("${KEEP}"),
        "y",
        Literal("$"),
        "z",
    ]
    assert variables.split("costs $5 or $HOME") == ["costs $5 or $HOME"]  # bare: left as written


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("$(id)", "$(...) runs a command"),
        ("a$((1+2))", "$(...) runs a command"),
        ("`id`", "a backtick runs a command"),
        ("${X:-$(id)}", "${X:-$(id)} is not a variable slurmgen expands"),
        ("${X:-${Y}}", "${X:-${Y} is not a variable slurmgen expands"),
        ("${#X}", "${#X} is not a variable slurmgen expands"),
        ("${X:=y}", "${X:=y} is not a variable slurmgen expands"),
        ("${X", "${X is not a variable slurmgen expands"),
        ("${X:-'q'}", "is not a variable slurmgen expands"),
    ],
)
def test_what_would_run_a_command_or_is_not_plain_is_refused(text: str, said: str) -> None:
    with pytest.raises(variables.VariableError, match=None) as refused:
        variables.split(text)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_a_literal_may_hold_what_a_variable_may_not() -> None:
    assert variables.split("$$(id)") == [Literal("$"), "(id)"]
    assert variables.expand("$${X:-$(id)}", {}) == "${X:-$(id)}"


def test_bare_names_are_found_but_not_braced_or_escaped_ones() -> None:
    assert variables.bare_names("$HOME/${USER}/$$PWD/$1/$") == ["HOME"]


def test_a_task_expands_from_its_environment_as_bash_would() -> None:
    env = {"RANK": "3", "EMPTY": ""}
    assert variables.expand("r${RANK}-${MISSING}-${EMPTY:-d}-${RANK:-d}-$${RANK}", env) == "r3--d-3-${RANK}"


def test_per_task_names_are_the_ones_set_in_each_task() -> None:
    assert Variable("SLURM_PROCID").per_task and Variable("LOCAL_RANK").per_task
    assert not Variable("SLURM_CPUS_PER_TASK").per_task and not Variable("SLURM_JOB_ID").per_task
