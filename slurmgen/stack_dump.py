"""A stacks file's main thread, as the hang watchdog writes it (task/watchdog.py) and the batch shell reads it
(batch/restart.py): py-spy's dump (`py-spy dump --pid P`: one block per thread, `Thread <tid> (<state>): "<name>"`,
the innermost frame first; with --nonblocking the names are missing, and the main thread is the one whose id is
the process's, Linux's thread-group leader) or, without py-spy, the program's own faulthandler dump (`Current
thread 0x...`: the thread that took the signal, sent to the process, is its main thread, as Linux tries the
thread-group leader first). Pure functions of the text; standard library only."""

from __future__ import annotations

import re

PROCESS = re.compile(r"^Process (\d+): ", re.MULTILINE)
PEER_WAIT = ("torch/distributed/", "torch\\distributed\\")  # where a rank waits in a collective for its peers


def main_frames(text: str) -> list[str]:
    """The main thread's frames of the last dump in ``text``, innermost first, each as its line stripped."""
    processes = PROCESS.findall(text)
    if processes:
        dump = text[text.rindex(f"Process {processes[-1]}: ") :]
        blocks = re.split(r"^Thread ", dump, flags=re.MULTILINE)[1:]
        main = [b for b in blocks if b.startswith(f"{processes[-1]} ")] or [b for b in blocks if '"MainThread"' in
                                                                              b.split("\n", 1)[0]]  # fmt: skip
        if main:
            return [line.strip() for line in main[-1].splitlines()[1:] if line.startswith("    ")]
    own = text.rsplit("Current thread ", 1)
    if len(own) < 2:
        return []
    return [line.strip() for line in own[1].splitlines()[1:] if line.startswith('  File "')]


def innermost_function(text: str) -> str:
    """The function the main thread is in (its innermost frame), or ""."""
    frames = main_frames(text)
    if not frames:
        return ""
    first = frames[0]
    if first.startswith('File "'):  # faulthandler: File "train.py", line 6 in waits_in_a_lock
        return first.rpartition(" in ")[2].strip()
    return first.split(" (", 1)[0]  # py-spy: waits_in_a_lock (train.py:6)


def waits_on_peers(text: str) -> bool:
    """Whether the main thread's innermost frame is inside torch.distributed: a rank waiting in a collective for a
    peer, a casualty of a hang rather than its cause."""
    frames = main_frames(text)
    return bool(frames) and any(mark in frames[0] for mark in PEER_WAIT)
