#!/usr/bin/python3
"""The peer of ddpc-train for bench/train_peers.sh: the same models in PyTorch
(1.13, --threads threads, one by default), the seed's transforms (ToTensor + Normalize((0.5,), (0.5,))),
a TensorDataset + DataLoader (default workers, shuffle) over the IDX files read
with gzip + numpy (torchvision is not installed on Debian 12).

torch.set_num_threads does not reach OpenBLAS's own thread pool (with
libopenblas0-pthread, PyTorch's sgemm runs on every core even after
set_num_threads(1)), so OPENBLAS_NUM_THREADS is set to --threads before torch
is imported: "one thread" then means one thread everywhere.

Prints one JSON line: model, batch size, samples/s and seconds of the training
epochs (the loop over the DataLoader: batching, forward, loss, backward, SGD
step), test accuracy, and which BLAS library the process mapped.
"""
import argparse, gzip, json, os, struct, sys, time

import numpy as np

torch = nn = None  # imported in main(), after OPENBLAS_NUM_THREADS is set


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        sys.exit(f"{path}: not a ubyte IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(d, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    sys.exit(f"{d}: no {stem}[.gz]")


def load(d, split):
    pre = "train" if split == "train" else "t10k"
    x = read_idx(find(d, f"{pre}-images-idx3-ubyte"))
    y = read_idx(find(d, f"{pre}-labels-idx1-ubyte"))
    # ToTensor (x / 255) then Normalize((0.5,), (0.5,)), in float32 as torchvision does
    t = torch.from_numpy(x.copy()).float().div(255).unsqueeze(1)
    t = t.sub(0.5).div(0.5)
    return t, torch.from_numpy(y.astype(np.int64))


def model(name):
    if name == "linear":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10))
    sys.exit(f"unknown model {name}")


def blas_library():
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
    return sorted(os.path.realpath(p) for p in libs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--model", default="linear")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--blas-threads", type=int, default=0, help="OPENBLAS_NUM_THREADS (default: --threads)")
    a = ap.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = str(a.blas_threads or a.threads)
    global torch, nn
    import torch
    import torch.nn as nn
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "test")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xtr, ytr), batch_size=a.batch_size,
                                         shuffle=True)
    m = model(a.model)
    opt = torch.optim.SGD(m.parameters(), lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()
    secs, cpu, samples = 0.0, 0.0, 0
    for epoch in range(a.epochs):
        m.train()
        t0, c0 = time.perf_counter(), time.process_time()
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(m(x), y)
            loss.backward()
            opt.step()
            samples += x.shape[0]
        secs += time.perf_counter() - t0
        cpu += time.process_time() - c0
    m.eval()
    with torch.no_grad():
        acc = (m(xte).argmax(1) == yte).float().mean().item()
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "model": a.model, "batch_size": a.batch_size,
                      "epochs": a.epochs, "samples_per_s": samples / secs, "seconds": secs, "cpu_seconds": cpu, "test_accuracy": acc,
                      "threads": torch.get_num_threads(), "blas_threads": a.blas_threads or a.threads,
                      "blas": blas_library()}))


if __name__ == "__main__":
    main()
