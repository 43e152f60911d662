"""Legacy name of the batch shell's helper (slurmgen.contract.LEGACY_ENTRIES): scripts rendered before the move
to slurmgen.batch, of jobs still queued when slurmgen was upgraded, run ``python3 -m slurmgen.runtime.batch``."""
