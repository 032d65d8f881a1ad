"""Lays out (Fashion-)MNIST where torchvision's datasets.MNIST(root) finds it
without downloading: root/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte,
uncompressed (torchvision checks for these files before it downloads).

    python npu_seed_data.py SRC ROOT [N]

SRC holds the .gz files (Debian's dataset-fashion-mnist:
/usr/share/datasets/fashion-mnist); N > 0 keeps the first N training
samples only (the IDX header's count rewritten), for a short epoch."""
import gzip
import os
import struct
import sys


def main():
    src, root = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    raw = os.path.join(root, "MNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for name, header, item in (("train-images-idx3-ubyte", 16, 784), ("train-labels-idx1-ubyte", 8, 1),
                               ("t10k-images-idx3-ubyte", 16, 784), ("t10k-labels-idx1-ubyte", 8, 1)):
        with gzip.open(os.path.join(src, name + ".gz")) as f:
            data = f.read()
        count = struct.unpack(">I", data[4:8])[0]
        if n and name.startswith("train") and n < count:
            data = data[:4] + struct.pack(">I", n) + data[8:header] + data[header:header + n * item]
            count = n
        with open(os.path.join(raw, name), "wb") as f:
            f.write(data)
    print(f"{raw}: {n or 'all'} training samples")


if __name__ == "__main__":
    main()
