"""bench/torch_latency.py — the time of one small blocking dist.all_reduce.

Run under a launcher, 2 processes, with the backend as the argument:

    build/bin/ddpc-run --standalone --nproc-per-node=2 \\
        build/venv-torch2/bin/python bench/torch_latency.py ddpc

200 warm-up calls, then 5,000 calls of a 2-element float32 tensor (8 B)
in 20 blocks, each after a barrier; prints on rank 0 the median block's
time per call, the slowest rank's (us). With `fake` as the backend it runs
alone, without a launcher: torch 2.x's `fake` process group does nothing,
so its time is torch's own path, the floor under any backend.
"""
import statistics
import sys
import time

import torch
import torch.distributed as dist

if len(sys.argv) > 1 and sys.argv[1] == "fake":  # torch 2.x: its path alone
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
else:
    dist.init_process_group(sys.argv[1] if len(sys.argv) > 1 else "ddpc")
t = torch.ones(2)
for _ in range(200):
    dist.all_reduce(t)
blocks, per = 20, 250
times = []
for _ in range(blocks):
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(per):
        dist.all_reduce(t)
    times.append((time.perf_counter() - t0) / per * 1e6)
m = torch.tensor([statistics.median(times)], dtype=torch.float64)
dist.all_reduce(m, op=dist.ReduceOp.MAX)
if dist.get_rank() == 0:
    print(f"{sys.argv[1] if len(sys.argv) > 1 else 'ddpc'} torch {torch.__version__}: "
          f"all_reduce 8 B {m.item():.2f} us a call")
dist.destroy_process_group()
