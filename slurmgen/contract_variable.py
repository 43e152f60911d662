"""`Variable`: one row of the contract's table of variables (slurmgen.contract.variables()).

Apart from slurmgen/contract.py so that the in-job processes, which import the contract for its names, never build
this class: only the renderer, the job context's generator and the tests read the table. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    """One variable of the contract. ``field`` and ``parse`` make the job context's field (its type is the parser's:
    slurmgen/job_context/values.py; a parser that takes a third argument gets ``default``); ``spec``, ``when`` and
    ``omit`` make the renderer's export (contract.FROM_SPEC rows only: ``spec`` is a dotted path on JobSpec, ``when``
    one to a flag without which the variable is left out)."""

    name: str
    doc: str
    set_by: str
    readers: tuple[str, ...]
    field: str = ""  # none: read by the script's shell code, the program, or a parse of several (ranks, the key)
    parse: str = ""
    default: object = None
    spec: str = ""
    when: str = ""
    omit: str = ""
