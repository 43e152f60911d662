"""Resume states on disk: plain (rank 0, one file) or sharded (every rank, torch.distributed.checkpoint),
committed by directory rename, optionally written in the background. Only what this user alone could have
written is loaded: the load rule of slurmgen/trust.py (ownership, mode, pinned descriptors).

    layout.py      names, completeness, sweep, prune, fsync helpers (pure or stdlib)
    record.py      SaveRecord (duration, bytes) and whether a save fits the stop's window (pure)
    state_tree.py  is the state sharded; staging for a background write; filling a state in place
    dcp_io.py      DCP writer with directory fsyncs and phase hooks; DCP read (resharding)
    commit.py      one sharded save: agree on a name, write, commit by rename, keep the newest N
    background.py  one save in flight on a thread, a handle that reports it once durable
    write_failure.py  why a write failed, in words: disk full, quota, permission, read-only
    candidates.py  the states on disk, newest first by the file server's clock; does one look whole
    loading.py the newest state every rank can read, falling back past a corrupt one
    store.py  what Preemption calls: save, load, sweep

Importing this package loads only the standard library; torch is imported inside the functions.
"""
