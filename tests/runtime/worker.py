"""A rank for the multi-process tests: init through the runtime, all_reduce, print one JSON line.

Run as a script (``python tests/runtime/worker.py MODE``), never imported by pytest. MODE:
- ``init``: init_distributed, all_reduce(rank + 1), barrier, print what this rank saw;
- ``raw``: the same through unmodified ``init_process_group("gloo", init_method="env://")`` (after the
  entry point prepared the environment);
- ``mesh``: init_distributed, then build_mesh from the JSON sizes in argv[2], print the mesh names and shape;
- ``late-barrier``: init, then every rank but the last calls barrier() and reports the diagnostic.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    mode = sys.argv[1]
    import torch
    import torch.distributed as dist

    started = time.monotonic()  # after importing torch: the tests time the setup, not a busy machine's imports

    out: dict[str, object] = {"pid": os.getpid()}
    if mode == "raw":
        dist.init_process_group("gloo", init_method="env://")
        out.update(rank=dist.get_rank(), world=dist.get_world_size())
    else:
        from slurmgen.runtime import init_distributed

        try:
            info = init_distributed("gloo")
        except Exception as err:  # the tests assert on the type and the message
            out.update(error=type(err).__name__, message=str(err), elapsed=time.monotonic() - started)
            print(json.dumps(out), flush=True)
            return 3
        out.update(
            rank=info.rank,
            local_rank=info.local_rank,
            world=info.world_size,
            addr=info.master_addr,
            port=info.master_port,
            iface=info.interface,
            local_world=info.local_world_size,
            gloo=os.environ.get("GLOO_SOCKET_IFNAME"),
            nccl=os.environ.get("NCCL_SOCKET_IFNAME"),
        )
    out["init_s"] = time.monotonic() - started
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    out["sum"] = value.item()
    if mode == "mesh":
        from slurmgen.runtime import build_mesh, wrap_ddp

        mesh = build_mesh(**json.loads(sys.argv[2]))
        out.update(mesh_names=list(mesh.mesh_dim_names or ()), mesh_shape=list(mesh.shape))
        model = wrap_ddp(torch.nn.Linear(2, 1))
        model(torch.ones(3, 2)).sum().backward()
        out["ddp_ok"] = all(p.grad is not None for p in model.parameters())
    if mode == "late-barrier":
        from slurmgen.runtime import BarrierTimeout, barrier

        if dist.get_rank() != dist.get_world_size() - 1:
            t0 = time.monotonic()
            try:
                barrier(reason="checkpoint")
                out["barrier"] = "passed"
            except BarrierTimeout as err:
                out.update(barrier="timeout", missing=err.missing, message=str(err), elapsed=time.monotonic() - t0)
        else:
            time.sleep(float(os.environ.get("SGT_LATE_SLEEP", "20")))
        print(json.dumps(out), flush=True)
        os._exit(0)  # skip destroy: the peers are in different states on purpose
    elif mode != "raw":
        from slurmgen.runtime import barrier, destroy

        barrier(reason="end")
        destroy()
    else:
        dist.destroy_process_group()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
