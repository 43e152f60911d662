"""Text from a job's files made safe to print on a terminal: every control character written as its escape.

A rank's log, and what the run history records of it (a failing rank's last line, a node or log name), hold
whatever the program printed: colour codes, a cursor move, an OSC sequence that sets the window title or, on some
terminals, writes the clipboard (ECMA-48; xterm's ctlseqs), a carriage return that overwrites the line before it,
a right-to-left override that shows a line other than the one that is there (Unicode TR #9). Shown raw, they act
on the reader's terminal; escaped (`\\x1b[31m`), they are read. Every line slurmgen prints from such text goes
through `printable`: the batch shell's end-of-run summary, and the restart lines of `status` and `history`.
Standard library only (the batch shell uses it)."""

from __future__ import annotations

# C0 but tab, DEL, C1; and the invisible characters that reorder or hide text (as spec strings refuse them).
_CONTROLS = [*range(0x00, 0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0)]
_INVISIBLE = [0x061C, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0xFEFF]
_ESCAPES = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" for code in _CONTROLS + _INVISIBLE}


def printable(text: str) -> str:
    """``text`` with each control or invisible reordering character written as its escape (`\\x1b`, `\\u202e`)."""
    return text.translate(_ESCAPES)


def printable_bytes(data: bytes) -> bytes:
    """``data`` (a chunk of a log) as UTF-8 with every control character escaped but its newlines and tabs; bytes
    that are not UTF-8 are written as `\\xNN`."""
    text = data.decode("utf-8", "backslashreplace")
    return "\n".join(printable(line) for line in text.split("\n")).encode()
