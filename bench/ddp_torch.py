#!/usr/bin/python3
"""The seed's program in PyTorch 1.13, for bench/ddp_peers.sh and
bench/torch_backend.py: init_process_group (gloo, or --backend ddpc; env://), a model wrapped in DistributedDataParallel, DistributedSampler +
DataLoader with ToTensor + Normalize((0.5,), (0.5,)), SGD, set_epoch each epoch.
Start it with torchrun's environment (ddpc-run: Debian 12's torchrun fails under
Python 3.11). The IDX files are read with gzip + numpy (no torchvision on Debian).

Rank 0 prints one JSON line: model, world size, seconds per epoch and samples/s
(medians over the epochs, as ddpc-train's figures are taken), test accuracy,
peak RSS of each rank (MiB).
"""
import argparse, json, os, resource, statistics, sys, time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_torch  # noqa: E402  (the same data reading and models)
from train_torch import load, model  # noqa: E402

train_torch.torch, train_torch.nn = torch, nn  # it imports torch lazily, in its own main()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--model", default="linear")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--backend", default="gloo", help="gloo, or ddpc (import ddpc_torch)")
    ap.add_argument("--comm-hook", choices=("allreduce", "none", "sync"), default="allreduce",
                    help="none: a DDP comm hook that communicates nothing (the run's ceiling); "
                         "sync: one that allreduces a single element per bucket and keeps the "
                         "bucket as it is (the ranks wait for each other as with allreduce, "
                         "but move no gradient)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.backend == "ddpc":
        import ddpc_torch  # noqa: F401  registers the backend
    dist.init_process_group(backend=a.backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "test")
    dataset = TensorDataset(xtr, ytr)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=a.batch_size, sampler=sampler)
    m = DDP(model(a.model))
    if a.comm_hook == "none":
        def no_communication(state, bucket):  # the bucket as it is
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut
        m.register_comm_hook(None, no_communication)
    elif a.comm_hook == "sync":
        def sync_only(state, bucket):  # the ranks meet, the bucket stays as it is
            buf = bucket.buffer()
            return dist.all_reduce(torch.zeros(1), async_op=True).get_future().then(lambda f: buf)
        m.register_comm_hook(None, sync_only)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(m.parameters(), lr=a.lr)
    epoch_secs, epoch_rates = [], []
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        samples = 0
        t0 = time.perf_counter()
        for batch_idx, (data, target) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(m(data), target)
            loss.backward()
            optimizer.step()
            samples += data.shape[0]
        epoch_secs.append(time.perf_counter() - t0)
        epoch_rates.append(samples * world / epoch_secs[-1])
    m.eval()
    with torch.no_grad():
        acc = (m(xte).argmax(1) == yte).float().mean().item()
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    all_rss = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(all_rss, rss)
    if rank == 0:
        print(json.dumps({"peer": "pytorch-" + a.backend, "model": a.model, "world_size": world,
                          "batch_size": a.batch_size, "epochs": a.epochs,
                          "epoch_seconds": statistics.median(epoch_secs),
                          "samples_per_s": statistics.median(epoch_rates),
                          "test_accuracy": acc, "peak_rss_mib": [round(float(r), 1) for r in all_rss]}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
