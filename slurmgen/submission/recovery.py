"""Token recovery: a submission whose sbatch timed out (or whose slurmgen was killed during it) is found in the
queue by the token in its comment, never submitted a second time. Every kind of job that runs sbatch shares it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from slurmgen.errors import SchedulerError
from slurmgen.journal import TOKEN_PREFIX, Entry, Journal, unresolved
from slurmgen.slurm.client import SlurmClient
from slurmgen.slurm.ids import JobId

# After an sbatch timeout, look for the submission this many times, this far apart: the controller that was too
# slow to answer sbatch may record the job a moment later.
LOOKUPS = 3
LOOKUP_DELAY = 2.0
# A "submitting" entry this old without an outcome means slurmgen died during sbatch: worth a look in the queue.
STALE = 300.0


def find_by_token(
    client: SlurmClient, name: str, token: str, sleep: Callable[[float], None] = time.sleep
) -> list[JobId]:
    """The jobs whose comment ends in our submission token (at most one, unless something is very wrong)."""
    marker = f"{TOKEN_PREFIX}{token}"
    for attempt in range(LOOKUPS):
        if attempt:
            sleep(LOOKUP_DELAY)
        try:
            rows = client.comments(name)
        except SchedulerError:
            continue  # the controller is still busy; a lookup is safe to repeat, a submission is not
        found = sorted({job for job, comment in rows if comment.split()[-1:] == [marker]}, key=str)
        if found:
            return found
    return []


def find_unresolved(
    entries: list[Entry], client: SlurmClient, clock: Callable[[], float] = time.time
) -> tuple[list[Entry], list[str]]:
    """Look in the queue for submissions whose outcome the journal does not know (sbatch timed out, or slurmgen
    was killed during it), by their tokens. Writes nothing: returns the entries found, as "submitted" entries
    with their job ids, and notes for the user."""
    now = clock()
    pending = [e for e in unresolved(entries) if e.event == "unknown" or now - e.time > STALE]
    if not pending:
        return [], []
    try:
        rows = client.comments()
    except SchedulerError as exc:
        return [], [f"warning: cannot look for {len(pending)} unresolved submission(s) in the queue: {exc}"]
    by_marker = {comment.split()[-1]: job for job, comment in rows if comment.split()}
    found, notes = [], []
    for e in pending:
        job = by_marker.get(f"{TOKEN_PREFIX}{e.token}")
        if job is not None:
            found.append(replace(e, event="submitted", job_id=str(job), time=now, extra={"recovered": True}))
            notes.append(f"note: the submission of {e.name} (token {e.token}) whose sbatch timed out is job {job}")
    return found, notes


def settle_unresolved(journal: Journal, client: SlurmClient, clock: Callable[[], float] = time.time) -> list[str]:
    """Record in the journal the unresolved submissions that turned up in the queue (submit does this, not
    status: reading commands never write). Returns notes for the user."""
    found, notes = find_unresolved(journal.entries(), client, clock)
    for entry in found:
        journal.append(entry)
    return notes
