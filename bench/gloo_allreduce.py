#!/usr/bin/python3
"""gloo_allreduce.py -- the PyTorch gloo peer of `ddpc-bench allreduce`.

float32 sum torch.distributed.all_reduce on the gloo backend, timed and
printed exactly as ddpc-bench does (nccl-tests' table; time = median over
iterations of the maximum over ranks; busbw = algbw * 2(n-1)/n; every size
checked once on rank/index-dependent inputs).

Run one process per rank with torchrun's variables set (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT), e.g. by bench/allreduce_peers.sh:

    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29600 \
        /usr/bin/python3 bench/gloo_allreduce.py -b 8 -e 64M &
    RANK=1 ... same ...
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist


def parse_size(s):
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    if s and s[-1].upper() in mul:
        return int(float(s[:-1]) * mul[s[-1].upper()])
    return int(s)


def inputs(rank, n, salt):
    """Small integers in [-14, 14] depending on rank and index (exact sums)."""
    i = torch.arange(n, dtype=torch.int64)
    x = (i * 2654435761 + rank * 40503 + salt * 97) % 29
    return (x - 14).to(torch.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-b", default="8")
    ap.add_argument("-e", default="64M")
    ap.add_argument("-f", type=int, default=2)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("-w", type=int, default=5)
    ap.add_argument("-c", type=int, default=1)
    a = ap.parse_args()
    minb, maxb = parse_size(a.b), parse_size(a.e)
    if a.n < 1 or a.f < 2 or minb < 4 or minb > maxb:
        sys.exit("gloo_allreduce: need -n >= 1, -f >= 2, 4 <= -b <= -e")
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"# gloo_allreduce: {world} ranks, float32, sum, iters {a.n}, warmup {a.w}, "
              f"check {a.c}, torch {torch.__version__}")
        print("# time: median over iterations of the maximum over ranks\n#")
        print("# %10s %12s %8s %6s %6s %10s %8s %8s %6s" % (
            "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"))
        print("# %10s %12s %8s %6s %6s %10s %8s %8s %6s" % (
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""))
    bw_sum, nsizes, wrong_total = 0.0, 0, 0
    bytes_ = minb
    while bytes_ <= maxb:
        n = bytes_ // 4
        src = inputs(rank, n, 0)
        t = src.clone()
        for _ in range(a.w):
            t.copy_(src)
            dist.all_reduce(t)
        dist.barrier()
        times = torch.zeros(a.n, dtype=torch.float64)
        for k in range(a.n):
            # gloo's all_reduce is in place; the copy that restores the input
            # is outside the timed region
            t.copy_(src)
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times[k] = time.perf_counter() - t0
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        med = float(times.median()) if a.n % 2 else float(times.sort().values[a.n // 2 - 1:a.n // 2 + 1].mean())
        wrong = 0
        if a.c:
            t = inputs(rank, n, 7)
            dist.all_reduce(t)
            want = sum(inputs(r, n, 7) for r in range(world))
            w = torch.tensor([int((t != want).sum())], dtype=torch.int64)
            dist.all_reduce(w)
            wrong = int(w[0])
            wrong_total += wrong
        algbw = n * 4 / med / 1e9
        busbw = algbw * 2.0 * (world - 1) / world
        bw_sum += busbw
        nsizes += 1
        if rank == 0:
            print("  %10d %12d %8s %6s %6d %10.2f %8.3f %8.3f %6d" % (
                n * 4, n, "float32", "sum", -1, med * 1e6, algbw, busbw, wrong), flush=True)
        bytes_ *= a.f
    if rank == 0:
        print("# Out of bounds values : %d %s" % (wrong_total, "FAILED" if wrong_total else "OK"))
        print("# Avg bus bandwidth : %.4f" % (bw_sum / max(nsizes, 1)))
    dist.destroy_process_group()
    return 1 if wrong_total else 0


if __name__ == "__main__":
    sys.exit(main())
