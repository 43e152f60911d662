"""A failing rank's own text, printed back by slurmgen, never acts on the reader's terminal: the batch shell's
end-of-run summary of a real local run (`slurmgen run`) quotes the rank's last lines with their escape sequences
escaped (slurmgen/printable.py), as status and history show the run history's text."""

from __future__ import annotations

import sys
from pathlib import Path

from cli_run import local_job_id, run_slurmgen

from slurmgen.printable import printable

# Colour, an OSC title (BEL-terminated), a screen clear, a carriage return, a right-to-left override.
NOISE = "\x1b[31mred\x1b]0;owned\x07\x1b[2J\rover\u202eevil"
PROGRAM = f"import sys; print({NOISE!r}); sys.exit(3)"


def test_the_failing_ranks_last_lines_are_quoted_with_their_escapes_escaped(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        f"name: job\ncommand: [{sys.executable!r}, '-c', {PROGRAM!r}]\ntime: '00:10:00'\nnodes: 1\n"
        f"tasks_per_node: 1\npython: {sys.executable}\n"
    )
    done = run_slurmgen("run", "job.yaml", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    summary = (tmp_path / "logs" / f"job-{local_job_id(done)}.log").read_text()
    assert "failed first" in summary, summary
    quoted = [line.split("| ", 1)[1] for line in summary.split("\n") if "failed first" not in line and "| " in line]
    # the carriage return ends a line as the log's reader splits it; the step ran twice (a crash is restarted once
    # inside the allocation, then the same error at the same state ends the job): the log holds both
    assert quoted == [r"\x1b[31mred\x1b]0;owned\x07\x1b[2J", r"over\u202eevil"] * 2, summary
    assert "\x1b" not in summary and "\u202e" not in summary


def test_printable_escapes_controls_and_keeps_text_and_tabs() -> None:
    assert printable("a\tb é 進") == "a\tb é 進"
    assert printable("\x00\x7f\x9b\u200b") == r"\x00\x7f\x9b\u200b"


def test_a_restart_line_of_status_and_history_is_escaped() -> None:
    from slurmgen import run_history

    event = {"cause": "crash", "who": "rank 0 on n\x1b[2J", "error": "x"}
    assert run_history.restart_text(event) == r"crash: rank 0 on n\x1b[2J"
