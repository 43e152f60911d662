"""The trust rule has one home, slurmgen/trust.py: no other module of slurmgen defines its own `Untrusted`, or
tests a file's owner and group/other write bits itself (a second copy of the rule drifts from the first: one
refusal class the callers do not catch, one message without the fix)."""

from __future__ import annotations

import ast
from pathlib import Path

from recorded import REPO

PACKAGE = REPO / "slurmgen"
HOME = PACKAGE / "trust.py"
# The names that a check of ownership and mode is made of.
RULE_NAMES = {"geteuid", "S_IWGRP", "S_IWOTH"}


def rule_parts(path: Path) -> list[str]:
    """What in `path` belongs to the trust rule: a class Untrusted, a use of the rule's names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and node.name == "Untrusted":
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: class Untrusted")
        if isinstance(node, ast.Attribute | ast.Name):
            name = node.attr if isinstance(node, ast.Attribute) else node.id
            if name in RULE_NAMES:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {name}")
    return found


def test_the_trust_rule_lives_only_in_slurmgen_trust() -> None:
    elsewhere = [part for path in sorted(PACKAGE.rglob("*.py")) if path != HOME for part in rule_parts(path)]
    assert elsewhere == [], "use slurmgen.trust instead of a second copy of its rule"


def test_the_search_sees_the_rule_where_it_is() -> None:
    found = rule_parts(HOME)
    assert any("class Untrusted" in part for part in found) and any("geteuid" in part for part in found)
