"""One rank of bench/startup.py: the same small gloo program, launched bare or through slurmgen's script.

    BENCH_STARTUP_OUT=DIR BENCH_STARTUP_STATE=FILE BENCH_STARTUP_MODE=bare|slurmgen|save python3 bench/startup_prog.py

It writes DIR/rank<R>-run<SLURM_RESTART_COUNT>.json: wall-clock times (time.time()) of its milestones, from its
process's creation to the previous run's state loaded, and the processes between the step's srun and itself.

- bare: the rank variables from srun's (as a program without slurmgen sets them itself), init_process_group with
  env://, torch.load of the state file;
- slurmgen: init_distributed (its store, start barrier and process group timed apart), Preemption(), load();
- save: slurmgen's, then Preemption.save of the state that the timed runs load (a priming run; the bare state in
  FILE, slurmgen's copied to FILE.slurmgen);
- BENCH_STARTUP_PRIME=1 (a real cluster): the first run saves and has the job requeued, the second is timed.
"""

import time

FIRST_LINE = time.time()  # before any import of the program's own: the interpreter's start-up ends here

import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

STATE_MIB = 1  # a small model's state: the load is one file read, as in the tiny training job


def process_start() -> float:
    """When this process was created (fork), as wall-clock time: /proc/self/stat starttime (clock ticks since
    boot, proc(5)) against CLOCK_BOOTTIME now. 10 ms resolution."""
    return pid_start(os.getpid())


def pid_start(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
        ticks = int(handle.read().rpartition(")")[2].split()[19])
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
        return int(handle.read().rpartition(")")[2].split()[1])


def cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]


def below_srun() -> list[dict[str, Any]]:
    """This process and its ancestors up to (not including) the step's srun: pid, argv, creation time."""
    chain: list[dict[str, Any]] = []
    pid = os.getpid()
    while pid > 1:
        argv = cmdline(pid)
        if any("fake_srun" in word for word in argv) or os.path.basename(argv[0] if argv else "") == "srun":
            break
        chain.append({"pid": pid, "argv": argv, "start": pid_start(pid)})
        pid = parent_of(pid)
    return chain


def prime(mode: str, dist: Any, torch: Any, state_file: str) -> None:
    """A real cluster's first run: save the state, then requeue the job as a preemption would (slurmgen: through
    Preemption's own stop and requeue; bare: torch.save and `scontrol requeue`), so the timed run is a run 2."""
    blob = torch.zeros(STATE_MIB * 2**18)  # float32: STATE_MIB MiB
    if mode == "bare":
        for ours, slurms in (("RANK", "SLURM_PROCID"), ("WORLD_SIZE", "SLURM_NTASKS"), ("LOCAL_RANK", "SLURM_LOCALID")):
            os.environ.setdefault(ours, os.environ[slurms])
        dist.init_process_group("gloo", init_method="env://")
        dist.barrier()
        if dist.get_rank() == 0:
            torch.save({"model": blob}, state_file)
            subprocess.run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]], check=True)
        time.sleep(60)  # the requeue ends the job
    from slurmgen.runtime import Preemption, init_distributed

    init_distributed()
    pre = Preemption()
    pre.request("requeue", "save", "exit")
    pre.should_stop()
    pre.save_and_exit({"model": blob})


def main() -> None:
    marks: dict[str, float] = {"process": process_start(), "first_line": FIRST_LINE}
    mode = os.environ["BENCH_STARTUP_MODE"]
    restart = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    import torch
    import torch.distributed as dist

    marks["torch"] = time.time()
    out_dir = os.environ["BENCH_STARTUP_OUT"]
    state_file = os.environ["BENCH_STARTUP_STATE"]
    if os.environ.get("BENCH_STARTUP_PRIME") and restart == 0:
        prime(mode, dist, torch, state_file)
    if mode == "bare":
        # What a program launched by a bare srun does itself: torch's variables from Slurm's.
        for ours, slurms in (("RANK", "SLURM_PROCID"), ("WORLD_SIZE", "SLURM_NTASKS"), ("LOCAL_RANK", "SLURM_LOCALID")):
            os.environ.setdefault(ours, os.environ[slurms])
        dist.init_process_group("gloo", init_method="env://")
        marks["pg"] = time.time()
        state = torch.load(state_file, weights_only=True) if os.path.exists(state_file) else None
        marks["loaded"] = time.time()
    else:
        import slurmgen.runtime.dist as sdist
        from slurmgen.runtime import Preemption, init_distributed
        from slurmgen.runtime.store_barrier import StoreBarrier

        marks["runtime_import"] = time.time()
        opened, waited = sdist.open_c10d_store, StoreBarrier.wait  # type: ignore[attr-defined]

        def open_store(*args: Any, **kwargs: Any) -> Any:
            store = opened(*args, **kwargs)
            marks["store"] = time.time()
            return store

        def wait(self: StoreBarrier, *args: Any, **kwargs: Any) -> None:
            waited(self, *args, **kwargs)
            marks.setdefault("barrier", time.time())

        sdist.open_c10d_store = open_store  # type: ignore[attr-defined]  # timed where init_distributed calls it
        StoreBarrier.wait = wait  # type: ignore[method-assign]
        marks["init_start"] = time.time()
        init_distributed()
        marks["pg"] = time.time()
        pre = Preemption()
        marks["preemption"] = time.time()
        if mode == "save":
            blob = torch.zeros(STATE_MIB * 2**18)  # float32: STATE_MIB MiB
            pre.save({"model": blob})
            if dist.get_rank() == 0:
                torch.save({"model": blob}, state_file)
                # The job's end removes a completed job's state: the timed runs get this copy put back.
                shutil.copyfile(pre.path, state_file + ".slurmgen")
        state = pre.load()
        marks["loaded"] = time.time()
    rank = dist.get_rank()
    result = {"rank": rank, "mode": mode, "marks": marks, "loaded_state": state is not None, "chain": below_srun()}
    with open(os.path.join(out_dir, f"rank{rank}-run{restart}.json"), "w", encoding="utf-8") as out:
        json.dump(result, out)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
