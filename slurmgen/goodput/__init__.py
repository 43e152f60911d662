"""What a job did with its time: goodput, the badput buckets, a timeline and checkpoint-interval advice, as pure
functions of its run history (slurmgen.run_history) and the clock; the CLI and the API only read files and print.

- `timeline.py`: the run history painted into segments (productive or a badput bucket) and markers per run;
- `advice.py`: Young's and Daly's checkpoint interval from the measured save cost and interruption rate;
- `live.py`: the lines of `slurmgen status` (step, rate, ETA) for a job that runs;
- `text.py`, `html.py`: the terminal table and the self-contained HTML picture of `slurmgen report`.
"""
