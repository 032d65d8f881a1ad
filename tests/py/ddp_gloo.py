#!/usr/bin/python3
"""ddp_gloo.py -- a small PyTorch DDP program on the gloo backend, for
checking that a launcher (torchrun, ddpc-run) starts PyTorch programs right.

    ddpc-run --nproc-per-node=2 /usr/bin/python3 tests/py/ddp_gloo.py [STEPS]

Every rank: init_process_group('gloo', init_method='env://') from the
launcher's RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT (and, under an
agent store, TORCHELASTIC_USE_AGENT_STORE); DDP over Linear(16, 4) for STEPS
(default 5) SGD steps on this rank's shard of a fixed random data set; then
checks that
  1. every rank holds the same parameters as rank 0 (all_gather, bit for bit),
  2. they moved from the initial ones (training did something),
  3. all_reduce(rank + 1) == world * (world + 1) / 2,
and prints "ddp_gloo ok rank R world W store S attempt A loss L" (S: agent
when the launcher hosts the store, TORCHELASTIC_USE_AGENT_STORE=True, else
rank0; A: TORCHELASTIC_RESTART_COUNT). Exits non-zero on any failure.
"""
import gc
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]), (rank, os.environ["RANK"])
    assert world == int(os.environ["WORLD_SIZE"]), (world, os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)

    # A different initialisation on each rank: DDP must broadcast rank 0's.
    torch.manual_seed(1000 + rank)
    model = DDP(nn.Linear(16, 4))
    start = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    # The same data set on every rank (seed 0); each rank takes its shard.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64 * world, 16, generator=g)
    y = x @ torch.randn(16, 4, generator=g) + 0.1 * torch.randn(64 * world, 4, generator=g)
    xs, ys = x[rank::world], y[rank::world]
    for step in range(steps):
        b = slice((step * 16) % 64, (step * 16) % 64 + 16)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(xs[b]), ys[b])
        loss.backward()
        opt.step()

    # 1. the same parameters everywhere, bit for bit
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    for r, other in enumerate(gathered):
        if not torch.equal(other, flat):
            sys.exit(f"ddp_gloo: rank {rank}: parameters differ from rank {r}'s "
                     f"(max |d| {(other - flat).abs().max().item():g})")
    # 2. training moved them (rank 0's start is what DDP broadcast)
    dist.broadcast(start, 0)
    if torch.equal(start, flat) and steps > 0:
        sys.exit(f"ddp_gloo: rank {rank}: parameters did not change in {steps} steps")
    # 3. a plain all_reduce
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    want = world * (world + 1) / 2
    if t.item() != want:
        sys.exit(f"ddp_gloo: rank {rank}: all_reduce(rank + 1) = {t.item()}, want {want}")
    dist.barrier()
    # Whose TCPStore init_process_group used: the launcher's (torchrun's
    # agent, ddpc-run), where every rank is a client, or one rank 0 hosts.
    store = "agent" if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" else "rank0"
    print(f"ddp_gloo ok rank {rank} world {world} store {store} "
          f"attempt {os.environ.get('TORCHELASTIC_RESTART_COUNT', '-')} loss {loss.item():.6f}", flush=True)
    # DDP's reducer holds the process group from inside a reference cycle:
    # left to the interpreter's last collection, torch 2.x's gloo worker
    # threads may still hold Python objects while Python shuts down, and
    # abort ("terminate called without an active exception"). Free them now.
    del model, opt, loss
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
