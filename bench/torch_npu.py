#!/usr/bin/env python3
"""The seed's program as written for Ascend (examples/ddp_mnist_npu.py) on the
emulated npu (ddpc_torch_npu, backend 'hccl') beside the same script edited
for 'cpu' with backend 'ddpc': the emulation's own cost, side by side.

    build/venv-torch214/bin/python bench/torch_npu.py --reps 3 [--samples N]

Each repetition runs both under torchrun (2 processes), in alternating
order; rank 0 times train() (init_process_group, the data set, one epoch,
the save) through bench/torch_npu_train.py. Prints each run, then the
medians and npu/cpu. Fashion-MNIST is laid out under a scratch directory as
torchvision finds it (tests/py/npu_seed_data.py)."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--samples", type=int, default=0, help="the first N training samples (0: all 60000)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    py = sys.executable
    work = tempfile.mkdtemp(prefix="ddpc-bench-npu-")
    subprocess.run([py, os.path.join(ROOT, "tests/py/npu_seed_data.py"), a.data, os.path.join(work, "data"),
                    str(a.samples)], check=True)
    script = os.path.join(ROOT, "examples/ddp_mnist_npu.py")
    variants = {"npu hccl": script, "cpu ddpc": os.path.join(work, "cpu_ddpc.py")}
    with open(variants["cpu ddpc"], "w") as f:
        subprocess.run(["sh", os.path.join(ROOT, "tests/py/npu_seed_edit.sh"), "ddpc", script], stdout=f, check=True)
    env = dict(os.environ, HCCL_IF_IP="127.0.0.1", TORCH_CPP_LOG_LEVEL="ERROR")
    times = {k: [] for k in variants}
    print(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {os.cpu_count()} CPUs, "
          f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}, 2 processes (torchrun), "
          f"{a.samples or 60000} samples", flush=True)
    for rep in range(a.reps):
        order = list(variants) if rep % 2 == 0 else list(reversed(variants))
        for name in order:
            out = subprocess.run([py, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
                                  os.path.join(ROOT, "bench/torch_npu_train.py"), variants[name]],
                                 cwd=work, env=env, capture_output=True, text=True)
            m = re.search(r"train_s ([0-9.]+)", out.stdout)
            if out.returncode != 0 or not m:
                sys.exit(f"{name}: rc={out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
            times[name].append(float(m.group(1)))
            print(f"# rep {rep + 1} {name}: train() {times[name][-1]:.2f} s", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n| program | train() s, median of {a.reps} |\n|---|---:|")
    for k, v in med.items():
        print(f"| {k} | {v:.2f} |")
    print(f"| npu/cpu | {med['npu hccl'] / med['cpu ddpc']:.3f} |")
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
