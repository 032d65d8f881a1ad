#!/usr/bin/python3
"""The seed's program: Linear(784, 10) on (Fashion-)MNIST with DDP, in PyTorch,
on any torch.distributed backend, 10 epochs. The twin of examples/ddp_mnist.c:
the same arguments (--data, --epochs, --limit) and the same lines from
rank 0, the loss every 100 batches and after each epoch
"Epoch: E | BACKEND | SECONDS s | loss MEAN | test accuracy ACC"
(tests/dist/test_train_ddp.c fails when the two drift apart).

    build/bin/ddpc-run --nproc-per-node=2 /usr/bin/python3 examples/ddp_mnist.py --backend ddpc

(PYTHONPATH=build/python finds ddpc_torch before `make install`.) The IDX
files are read with gzip, as torchvision's MNIST would read them: Debian has
no torchvision. --save FILE writes rank 0's final parameters (torch.save of
the state_dict; compare two with torch.load + torch.equal, not cmp: torch.save
names the archive inside after the file). --limit N trains on the first N
samples only (fast tests).

Where torchvision is installed (pip's torch 2.x with torchvision),
--torchvision ROOT reads the data as the seed writes it,
datasets.FashionMNIST(ROOT, transform=Compose([ToTensor(), Normalize((0.5,),
(0.5,))])), from ROOT/FashionMNIST/raw (the IDX files unpacked; they are
unpacked there from --data when missing). --comm-hook none registers a DDP
comm hook that communicates nothing (each rank keeps its own gradients):
the run's communication-free ceiling, for benchmarks; --comm-hook sync one
that only synchronizes (a one-element all_reduce per bucket, the gradients
left as they are): the ranks' waiting for each other without the data.
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def mnist(data, split):  # datasets.MNIST(data, train=..., transform=ToTensor + Normalize((0.5,), (0.5,)))
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(data, f"{prefix}-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(data, f"{prefix}-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.5) / 0.5
    return TensorDataset(x, torch.from_numpy(y.astype(np.int64)))


def torchvision_mnist(root, data, train):
    """The seed's dataset: torchvision's FashionMNIST with its transforms,
    from root/FashionMNIST/raw, unpacked there from data's .gz files first
    (torchvision would download them)."""
    from torchvision import datasets, transforms

    raw = os.path.join(root, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for name in sorted(os.listdir(data)):
        dst = os.path.join(raw, name[:-3])
        if name.endswith(".gz") and not os.path.exists(dst):
            with gzip.open(os.path.join(data, name)) as f, open(dst + f".{os.getpid()}", "wb") as g:
                g.write(f.read())
            os.replace(dst + f".{os.getpid()}", dst)  # ranks unpack at once: each file whole
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
    return datasets.FashionMNIST(root, train=train, download=False, transform=tf)


def no_communication(state, bucket):
    """A DDP comm hook that communicates nothing: the bucket as it is."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def sync_only(state, bucket):
    """A DDP comm hook that only synchronizes: one element allreduced, the bucket as it is."""
    buf = bucket.buffer()
    return dist.all_reduce(torch.zeros(1), async_op=True).get_future().then(lambda f: buf)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--save", help="write rank 0's final parameters here")
    ap.add_argument("--limit", type=int, help="train on the first N samples only")
    ap.add_argument("--torchvision", metavar="ROOT", help="read the data with torchvision's datasets and transforms")
    ap.add_argument("--comm-hook", choices=("allreduce", "none", "sync"), default="allreduce",
                    help="none: a hook that communicates nothing (the ceiling); sync: one that "
                         "only synchronizes")
    a, _ = ap.parse_known_args()  # torch.distributed.launch adds --local_rank
    if a.backend == "ddpc":
        import ddpc_torch  # noqa: F401  registers the backend

    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group(a.backend, init_method="env://")
    rank = dist.get_rank()
    model = DDP(nn.Linear(784, 10))
    if a.comm_hook == "none":
        model.register_comm_hook(None, no_communication)
    elif a.comm_hook == "sync":
        model.register_comm_hook(None, sync_only)
    if a.torchvision:
        dataset = torchvision_mnist(a.torchvision, a.data, True)
        if a.limit:
            dataset = torch.utils.data.Subset(dataset, range(a.limit))
        t = torchvision_mnist(a.torchvision, a.data, False)
        test = TensorDataset(torch.stack([t[i][0].reshape(784) for i in range(len(t))]), t.targets)
    else:
        dataset = mnist(a.data, "train")
        if a.limit:
            dataset = TensorDataset(*(t[:a.limit] for t in dataset.tensors))
        test = mnist(a.data, "test")
    sampler = DistributedSampler(dataset, seed=0)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        start, losses = time.perf_counter(), []
        for batch, (data, target) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(data.reshape(-1, 784)), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if batch % 100 == 0 and rank == 0:
                print(f"Epoch: {epoch} | Batch: {batch} | Loss: {losses[-1]:.4f}")
        seconds = time.perf_counter() - start
        with torch.no_grad():
            accuracy = (model(test.tensors[0]).argmax(1) == test.tensors[1]).float().mean().item()
        if rank == 0:
            print(f"Epoch: {epoch} | {a.backend} | {seconds:.2f} s | loss {sum(losses) / len(losses):.4f} | "
                  f"test accuracy {accuracy:.4f}", flush=True)

    if rank == 0 and a.save:
        torch.save(model.module.state_dict(), a.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
