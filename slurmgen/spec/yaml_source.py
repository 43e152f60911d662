"""YAML loading that keeps what YAML 1.1 would silently change.

`yaml.safe_load` turns `time: 1:00:00` into 3600, `nodes: 010` into 8, `debug: no` into False, and lets the last
of two duplicate keys win. We compose the node graph ourselves instead, build plain Python values, and keep a
side table with each scalar's source text, tag and line, keyed by its field path. The spec validator uses that
table to explain a trap in the user's own words ("you wrote 1:00:00; quote it").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from slurmgen.errors import Problem

FieldPath = tuple[str | int, ...]

# Tags the safe loader resolves on its own; anything else (e.g. !!python/object) is refused.
_SCALAR_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:timestamp",
}
# Aliases (and `<<:` merge keys) can expand a tiny file into millions of values: at most MAX_NODES values may be
# reached again through an alias. Values written out are bounded by the file's size (load.MAX_SPEC_BYTES), so a
# large explicit sweep (sweep.MAX_POINTS points) is no bomb.
MAX_NODES = 20_000
MAX_DEPTH = 32  # a job spec nests three levels; deeper is a broken or hostile file
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


class _Refused:
    """Stands for a value the loader refused (a forbidden tag); the problem is already reported."""

    def __repr__(self) -> str:
        return "<refused>"


REFUSED = _Refused()


@dataclass(frozen=True)
class Mark:
    """Where a scalar came from: its text as written, its resolved YAML tag, its 1-based line."""

    raw: str
    tag: str
    line: int
    quoted: bool


@dataclass
class YamlDocument:
    value: Any
    marks: dict[FieldPath, Mark]
    lines: dict[FieldPath, int]  # line of every node (mappings and sequences too)


def dotted(path: FieldPath) -> str:
    """`("distributed", "port")` -> `distributed.port`; list indexes as `command[2]`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


class _Builder:
    def __init__(self, source: str) -> None:
        self.source = source
        self.marks: dict[FieldPath, Mark] = {}
        self.lines: dict[FieldPath, int] = {}
        self.problems: list[Problem] = []
        self.count = 0  # values reached again through an alias (or a merge key)
        self._built: set[int] = set()  # the nodes built once (an alias is the same node object again)
        self._constructor = yaml.SafeLoader("")

    def problem(self, path: FieldPath, line: int, message: str) -> None:
        where = self.source if self.source.startswith("--") else f"{self.source}:{line}"
        self.problems.append(Problem(where, dotted(path), message))

    def build(self, node: yaml.Node, path: FieldPath) -> Any:
        line = node.start_mark.line + 1
        if id(node) in self._built:
            self.count += 1
        self._built.add(id(node))
        if self.count > MAX_NODES:
            if self.count == MAX_NODES + 1:
                self.problem((), line, f"more than {MAX_NODES} values (an alias bomb?); a job spec is small")
            return None
        self.lines[path] = line
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path, line)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ_TAG:
                self.problem(path, line, f"the YAML tag {node.tag} is not allowed; remove it")
                return REFUSED
            return [self.build(child, (*path, i)) for i, child in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, line)
        self.problem(path, line, "unsupported YAML node")  # pragma: no cover - yaml has only three kinds
        return None

    def _scalar(self, node: yaml.ScalarNode, path: FieldPath, line: int) -> Any:
        if node.tag not in _SCALAR_TAGS:
            self.problem(path, line, f"the YAML tag {node.tag} is not allowed; write a plain value")
            return REFUSED
        quoted = node.style in ("'", '"', "|", ">")
        self.marks[path] = Mark(raw=node.value, tag=node.tag.rsplit(":", 1)[1], line=line, quoted=quoted)
        if node.tag == "tag:yaml.org,2002:timestamp":
            return node.value  # a date is only text to us; keep what was written
        return self._constructor.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, path: FieldPath, line: int) -> Any:
        if node.tag != _MAP_TAG:
            self.problem(path, line, f"the YAML tag {node.tag} is not allowed; remove it")
            return REFUSED
        # PyYAML 6.0.3 and older flatten nested merge keys by copying: a 458-byte file reached 5.4 GB. Count
        # what flattening would make first (each mapping once) and refuse a bomb before yaml builds it.
        if _merged_size(node, {}) > MAX_NODES:
            self.count = MAX_NODES + 1
            self.problem((), line, f"merge keys (<<) expand to more than {MAX_NODES} values (an alias bomb?)")
            return None
        own = {id(pair[0]) for pair in node.value if pair[0].tag != _MERGE_TAG}
        try:
            self._constructor.flatten_mapping(node)  # resolve `<<: *anchor` merge keys
        except yaml.YAMLError as exc:
            self.problem(path, line, f"bad merge key: {exc}")
            return None
        # The keys written in this mapping override those merged in (YAML merge key spec); flatten_mapping puts
        # the merged ones first, so a merged key is taken only when no key of the mapping's own has its name.
        named = {pair[0].value for pair in node.value if id(pair[0]) in own and isinstance(pair[0], yaml.ScalarNode)}
        pairs = [
            p for p in node.value if id(p[0]) in own or not (isinstance(p[0], yaml.ScalarNode) and p[0].value in named)
        ]
        out: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        merged: set[str] = set()
        for key_node, value_node in pairs:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag not in _SCALAR_TAGS:
                self.problem(path, key_line, "keys must be plain words")
                continue
            key = key_node.value
            if key_node.tag != "tag:yaml.org,2002:str":
                # `on: 1` makes the key the boolean True and `1: x` an integer; keys are names, so keep the text.
                key = str(key_node.value)
            if key in merged:
                continue  # two merged mappings with one key: the first listed wins (YAML merge key spec)
            if id(key_node) not in own:
                merged.add(key)
            if key in first_line:
                self.problem(
                    (*path, key),
                    key_line,
                    f"duplicate key (first at line {first_line[key]}); YAML would keep only the last; remove one",
                )
                continue
            first_line[key] = key_line
            out[key] = self.build(value_node, (*path, key))
        return out


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _merged_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many key/value pairs `node` holds once its merge keys are flattened (each mapping counted once)."""
    if not isinstance(node, yaml.MappingNode):
        return 1
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 0  # a merge cycle counts nothing more
    total = 0
    for key, value in node.value:
        if key.tag != _MERGE_TAG:
            total += 1
        elif isinstance(value, yaml.SequenceNode):
            total += sum(_merged_size(item, memo) for item in value.value)
        else:
            total += _merged_size(value, memo)
    memo[id(node)] = total
    return total


# YAML 1.1 reads these as line breaks (yaml.reader, "NEL, LS, PS"): inside a quoted value they are folded into a
# space, so the spec would silently carry another value than the file shows. Refused wherever they are.
_YAML_BREAKS = {
    "\x85": "U+0085 (NEXT LINE)",
    "\u2028": "U+2028 (LINE SEPARATOR)",
    "\u2029": "U+2029 (PARAGRAPH SEPARATOR)",
}


def _too_deep(text: str, source: str) -> Problem | None:
    """A problem when lists and mappings nest deeper than MAX_DEPTH. yaml's composer recurses once per level, so
    5,000 nested `[` end in RecursionError; its event parser keeps a stack of its own, so count on the events."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = f":{event.start_mark.line + 1}" if event.start_mark is not None else ""
                where = source if source.startswith("--") else f"{source}{line}"
                return Problem(where, "", f"lists and mappings nest deeper than {MAX_DEPTH} levels; a job spec is flat")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def _unreadable(exc: yaml.reader.ReaderError, text: str, source: str) -> Problem:
    """A character YAML does not read (a NUL, a C0 control, U+FFFE: yaml/reader.py, check_printable) as one line
    with its line number; PyYAML's own message is two lines that give only a position in a "<unicode string>"."""
    number = text[: max(0, exc.position)].count("\n") + 1
    where = source if source.startswith("--") else f"{source}:{number}"
    code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
    return Problem(where, "", f"contains the character U+{code:04X}, which YAML does not allow; remove it")


def load_yaml(text: str, source: str) -> tuple[YamlDocument | None, list[Problem]]:
    """Parse one YAML document: the values with their marks (None if unparsable) and the problems found."""
    for char, name in _YAML_BREAKS.items():
        if char in text:
            number = text[: text.index(char)].count("\n") + 1
            where = source if source.startswith("--") else f"{source}:{number}"
            return None, [Problem(where, "", f"contains {name}, which YAML reads as a line break; remove it")]
    try:
        too_deep = _too_deep(text, source)
        if too_deep is not None:
            return None, [too_deep]
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.reader.ReaderError as exc:
        return None, [_unreadable(exc, text, source)]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        what = exc.problem or str(exc)
        return None, [Problem(f"{source}{line}", "", f"not valid YAML: {what}")]
    except yaml.YAMLError as exc:
        return None, [Problem(source, "", f"not valid YAML: {exc}")]
    if not nodes or nodes[0] is None:
        return None, [Problem(source, "", "the file is empty; a job spec needs at least name, command and time")]
    if len(nodes) > 1:
        return None, [Problem(source, "", "holds several YAML documents (---); put one job spec per file")]
    builder = _Builder(source)
    value = builder.build(nodes[0], ())
    if builder.count > MAX_NODES:
        return None, [p for p in builder.problems if "alias bomb" in p.message]
    # Problems found while building (duplicate keys, tags) come back with the values, so the caller can go on
    # and report every other problem of the file in the same run.
    return YamlDocument(value=value, marks=builder.marks, lines=builder.lines), builder.problems


def load_override(text: str) -> tuple[Any, dict[FieldPath, Mark], list[Problem]]:
    """Parse one `--set key=VALUE` value the way the same text would read in a spec file.

    Marks come back keyed by paths relative to the overridden field.
    """
    if not text.strip():
        return "", {(): Mark(raw="", tag="str", line=1, quoted=False)}, []
    try:
        too_deep = _too_deep(text, "--set")
        if too_deep is not None:
            return None, {}, [too_deep]
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.reader.ReaderError as exc:
        return None, {}, [_unreadable(exc, text, "--set")]
    except yaml.YAMLError as exc:
        return None, {}, [Problem("--set", "", f"the value {text!r} is not valid YAML: {exc}")]
    if node is None:
        return "", {(): Mark(raw="", tag="str", line=1, quoted=False)}, []
    builder = _Builder("--set")
    value = builder.build(node, ())
    return value, builder.marks, builder.problems
