"""A GPT-style training program as users write them, with nothing of slurmgen in it: torchrun's variables (RANK,
LOCAL_RANK, WORLD_SIZE), its own `ckpt.pt` to resume from, and its progress only in the lines it prints,
`iter N: loss X` (as nanoGPT's train.py prints them). On CPU, gloo and `DDP(model, device_ids=None)`.

    python gpt_iters.py MAX_ITERS [--iter-time S] [--save-every N]
"""

import argparse
import math
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("max_iters", type=int)
parser.add_argument("--iter-time", type=float, default=0.05)
parser.add_argument("--save-every", type=int, default=20)
args = parser.parse_args()

rank = int(os.environ["RANK"])
local_rank = int(os.environ["LOCAL_RANK"])
world_size = int(os.environ["WORLD_SIZE"])
backend = "nccl" if torch.cuda.is_available() else "gloo"
dist.init_process_group(backend=backend)
device = torch.device(f"cuda:{local_rank}" if backend == "nccl" else "cpu")

vocab, block, width = 64, 16, 32


class TinyGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(block, width)
        self.block = nn.TransformerEncoderLayer(width, 2, 4 * width, dropout=0.0, batch_first=True)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(idx.shape[1], device=idx.device)
        return self.head(self.block(x, src_mask=mask, is_causal=True))


torch.manual_seed(0)
model = TinyGPT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
iter_num = 0
if os.path.exists("ckpt.pt"):
    checkpoint = torch.load("ckpt.pt", map_location=device)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    iter_num = checkpoint["iter_num"]
    if rank == 0:
        print(f"resuming from iter {iter_num}", flush=True)
model = DDP(model, device_ids=[local_rank] if backend == "nccl" else None)
data = torch.Generator().manual_seed(1234 + rank)

while iter_num < args.max_iters:
    began = time.monotonic()
    idx = torch.randint(vocab, (4, block + 1), generator=data).to(device)
    logits = model(idx[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), idx[:, 1:].reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    iter_num += 1
    if rank == 0:
        print(f"iter {iter_num}: loss {loss.item():.4f}, world {world_size}", flush=True)
        if iter_num % args.save_every == 0:
            raw = model.module.state_dict()
            torch.save({"model": raw, "optimizer": optimizer.state_dict(), "iter_num": iter_num}, "ckpt.tmp")
            os.replace("ckpt.tmp", "ckpt.pt")
    time.sleep(max(args.iter_time - (time.monotonic() - began), 0.0))
    assert math.isfinite(loss.item())

dist.destroy_process_group()
