#!/usr/bin/python3
"""torch_backend.py -- torch.distributed backends side by side ('gloo' and
'ddpc'), --nproc processes (2 by default) on this machine, in one run:

  allreduce  torch.distributed.all_reduce, float32 sum, at 8 B, 1 MiB and 64 MiB:
             time (median over iterations, after warm-up, of the maximum over
             ranks, as bench/gloo_allreduce.py and ddpc-bench take it) and bus
             bandwidth 2(n-1)/n * bytes / time; each size checked once;
  mnist      examples/ddp_mnist.py, one epoch: epoch time and test accuracy;
  mlp        bench/ddp_torch.py --model mlp (784-512-512-10, ReLU), batch 128,
             SGD lr 0.01, --mlp-epochs (1) epochs: samples/s over all
             processes (median over its epochs); --mlp-ceiling: also the same
             run with a comm hook that communicates nothing (the ceiling), and
             with one that only synchronizes (a one-element all_reduce per
             bucket, the gradients left as they are): what the ranks' waiting
             for each other costs, apart from moving the gradients;
  fsdp2      an FSDP2 training step (`fully_shard` per layer and at the root,
             on a CPU DeviceMesh of every process) of nn.TransformerEncoder,
             4 layers, d_model 256, 4 heads, feed-forward 1024, batch 16 x 128
             tokens per process, Adam: steps/s (after 2 warm-up steps, over
             --fsdp2-steps, the slowest rank's time);
  seed       the seed's program as it is written (examples/ddp_mnist.py
             --torchvision: torchvision's FashionMNIST and transforms; needs a
             Python with torchvision, e.g. pip's torch 2.14.1 + torchvision
             0.29.1), one epoch, and beside it on the same backend its
             synchronization-only run (--comm-hook sync) and its
             communication-free ceiling (--comm-hook none: a DDP comm hook
             that communicates nothing): epoch times and time / ceiling.

Every measurement is a fresh job started by ddpc-run (or torchrun); the
backends alternate within each repetition, in the opposite order every other
repetition, so that the machine's drift hits both alike. Prints each job's
figures, then a markdown table of the medians over the repetitions with the
ratio ddpc/gloo per row, and the command.

    /usr/bin/python3 bench/torch_backend.py --backends gloo            # gloo alone
    /usr/bin/python3 bench/torch_backend.py --backends gloo,ddpc       # side by side
    /usr/bin/python3 bench/torch_backend.py --parts allreduce --reps 5
    build/venv-torch2/bin/python bench/torch_backend.py --python build/venv-torch2/bin/python \
        --backends gloo,ddpc --parts allreduce,mlp          # torch 2.13 (make torch2)
    build/venv-torch2/bin/python bench/torch_backend.py --python build/venv-torch2/bin/python \
        --backends gloo,ddpc --parts fsdp2 --nproc 4
    PY --backends gloo,ddpc --parts seed --python PY    # PY: a torch 2.x with torchvision and ddpc_torch

'ddpc' needs `make torch` (build/python/ddpc_torch, put on PYTHONPATH here) or
ddpc_torch installed. One BLAS/OpenMP thread per process.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MARK = "torch_backend-result: "
PARTS = ("allreduce", "mnist", "mlp", "fsdp2", "seed")
SIZES = ((8, 500, 20), (1 << 20, 100, 10), (64 << 20, 15, 3))  # bytes, iterations, warm-up


def init(backend):
    import torch
    import torch.distributed as dist
    if backend == "ddpc":
        import ddpc_torch  # noqa: F401  registers the backend
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method="env://")
    return torch, dist


def inputs(torch, rank, n, salt):
    """Small integers in [-14, 14] that depend on rank and index (exact sums), of
    period 1021 (a prime: a block moved by a power of two shows), made in a copy."""
    base = ((torch.arange(1021) * 40503 + rank * 97 + salt) % 29 - 14).float()
    return base.repeat(n // 1021 + 1)[:n].contiguous()


def worker_allreduce(a):
    torch, dist = init(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {}
    for nbytes, iters, warmup in SIZES:
        n = nbytes // 4
        src = inputs(torch, rank, n, 0)
        t = src.clone()
        for _ in range(warmup):
            t.copy_(src)
            dist.all_reduce(t)
        dist.barrier()
        times = torch.zeros(iters, dtype=torch.float64)
        for k in range(iters):
            t.copy_(src)  # all_reduce is in place; restoring the input is not timed
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times[k] = time.perf_counter() - t0
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        t = inputs(torch, rank, n, 7)
        dist.all_reduce(t)
        wrong = int((t != sum(inputs(torch, r, n, 7) for r in range(world))).sum())
        sec = statistics.median(times.tolist())
        out[str(nbytes)] = {"us": sec * 1e6, "busbw": 2 * (world - 1) / world * nbytes / sec / 1e9, "wrong": wrong}
    if rank == 0:
        print(MARK + json.dumps(out), flush=True)
    dist.destroy_process_group()


def worker_fsdp2(a):
    torch, dist = init(a.backend)
    import torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    rank = dist.get_rank()
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for block in model.layers:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(16, 128, 256, generator=g)

    def step():
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    for _ in range(2):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.fsdp2_steps):
        step()
    sec = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(sec, op=dist.ReduceOp.MAX)
    loss = model(x).pow(2).mean().detach().reshape(1)
    if not torch.isfinite(loss).all():
        sys.exit(f"torch_backend: fsdp2: loss {loss.item()}")
    if rank == 0:
        print(MARK + json.dumps({"steps_per_s": a.fsdp2_steps / sec.item(), "loss": loss.item()}), flush=True)
    dist.destroy_process_group()


def uses_build_python(python):
    """Debian's torch 1.13 finds ddpc_torch in build/python (make torch); a
    torch 2.x environment has it installed (pip install ./bridges/torch),
    and build/python's 1.13 module must not shadow it."""
    return os.path.isdir(os.path.join(ROOT, "build/python/ddpc_torch")) and subprocess.run(
        [python, "-c", "import torch, sys; sys.exit(int(torch.__version__.split('.')[0]) >= 2)"],
        stderr=subprocess.DEVNULL).returncode == 0


def launch(a, backend, argv):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    if backend == "ddpc" and uses_build_python(a.python):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "build/python"), env.get("PYTHONPATH")]))
    if a.launcher == "ddpc-run":
        cmd = [os.path.join(ROOT, "build/bin/ddpc-run"), f"--nproc-per-node={a.nproc}", "--standalone", a.python]
    else:
        cmd = [a.python, os.path.join(ROOT, "tests/py/torchrun.py"), "--standalone", f"--nproc_per_node={a.nproc}"]
    p = subprocess.run(cmd + argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=a.timeout)
    if p.returncode:
        sys.exit(f"torch_backend: {backend}: {shlex.join(cmd + argv)}: exit {p.returncode}\n" + p.stdout[-4000:])
    return p.stdout


def run_part(a, part, backend):
    """One job: {row: value}."""
    me = [os.path.abspath(__file__), "--backend", backend, "--data", a.data]
    if part == "allreduce":
        line = next(l for l in launch(a, backend, me + ["--worker", "allreduce"]).splitlines() if MARK in l)
        r = json.loads(line.split(MARK, 1)[1])
        if any(v["wrong"] for v in r.values()):
            sys.exit(f"torch_backend: {backend}: all_reduce gave wrong sums: {r}")
        rows = {}
        for nbytes, _, _ in SIZES:
            name = f"all_reduce {human(nbytes)}"
            rows[f"{name} | time (us), lower is better"] = r[str(nbytes)]["us"]
            rows[f"{name} | bus bandwidth (GB/s)"] = r[str(nbytes)]["busbw"]
        return rows
    if part == "mnist":
        argv = [os.path.join(ROOT, "examples/ddp_mnist.py"), "--backend", backend, "--data", a.data, "--epochs", "1"]
        out = launch(a, backend, argv + (["--limit", str(a.mnist_limit)] if a.mnist_limit else []))
        m = re.search(r"Epoch: 0 \| \S+ \| ([0-9.]+) s \|.*test accuracy ([0-9.]+)", out)
        if not m:
            sys.exit(f"torch_backend: {backend}: no epoch line from ddp_mnist.py:\n{out[-4000:]}")
        return {"ddp_mnist.py, 1 epoch | epoch time (s), lower is better": float(m.group(1)),
                "ddp_mnist.py, 1 epoch | test accuracy": float(m.group(2))}
    if part == "mlp":
        argv = [os.path.join(HERE, "ddp_torch.py"), "--backend", backend, "--data", a.data, "--model", "mlp",
                "--batch-size", "128", "--epochs", str(a.mlp_epochs), "--lr", "0.01"]
        rows = {}
        for hook in ("allreduce", "sync", "none") if a.mlp_ceiling else ("allreduce",):
            line = next(l for l in launch(a, backend, argv + ["--comm-hook", hook]).splitlines()
                        if '"samples_per_s"' in l)
            r = json.loads(line[line.index("{"):])
            what = {"allreduce": f"samples/s ({a.mlp_epochs} epoch)",
                    "sync": "synchronization only: one-element hook",
                    "none": "ceiling: no-communication hook"}[hook]
            rows[f"MLP 784-512-512-10, batch 128, DDP | {what}"] = r["samples_per_s"]
        return rows
    if part == "fsdp2":
        argv = me + ["--worker", "fsdp2", "--fsdp2-steps", str(a.fsdp2_steps)]
        line = next(l for l in launch(a, backend, argv).splitlines() if MARK in l)
        r = json.loads(line.split(MARK, 1)[1])
        return {"FSDP2 TransformerEncoder 4 x 256, batch 16 x 128 | steps/s": r["steps_per_s"]}
    if part == "seed":
        argv = [os.path.join(ROOT, "examples/ddp_mnist.py"), "--backend", backend, "--data", a.data, "--epochs", "1",
                "--torchvision", os.path.join(ROOT, "build/bench-data")]
        secs = []
        for hook in ("allreduce", "sync", "none"):  # the run, its synchronization alone, its ceiling
            out = launch(a, backend, argv + ["--comm-hook", hook])
            m = re.search(r"Epoch: 0 \| \S+ \| ([0-9.]+) s \|", out)
            if not m:
                sys.exit(f"torch_backend: {backend}: no epoch line from ddp_mnist.py:\n{out[-4000:]}")
            secs.append(float(m.group(1)))
        return {"seed's program (torchvision), 1 epoch | epoch time (s), lower is better": secs[0],
                "seed's program (torchvision), 1 epoch | synchronization only: one-element hook (s)": secs[1],
                "seed's program (torchvision), 1 epoch | ceiling: no-communication hook (s)": secs[2],
                "seed's program (torchvision), 1 epoch | time / ceiling, lower is better": secs[0] / secs[2],
                "seed's program (torchvision), 1 epoch | synchronization only / ceiling": secs[1] / secs[2]}
    raise ValueError(part)


def human(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def fmt(v):
    if 0 < v < 0.01:
        return f"{v:.3g}"
    return f"{v:.4f}" if v < 1 else f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="gloo", help="comma-separated, e.g. gloo,ddpc (default gloo)")
    ap.add_argument("--parts", default="allreduce,mnist,mlp")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of every job (medians; default 3)")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--launcher", choices=("ddpc-run", "torchrun"), default="ddpc-run")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--mlp-epochs", type=int, default=1)
    ap.add_argument("--mlp-ceiling", action="store_true",
                    help="mlp: also its communication-free ceiling (a comm hook that communicates nothing) "
                         "and its synchronization-only run (a hook allreducing one element per bucket)")
    ap.add_argument("--mnist-limit", type=int, default=0, help="ddp_mnist.py --limit (0: the whole epoch)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per job")
    ap.add_argument("--fsdp2-steps", type=int, default=5, help="timed FSDP2 steps per job (default 5)")
    ap.add_argument("--worker", choices=("allreduce", "fsdp2"), help=argparse.SUPPRESS)
    ap.add_argument("--backend", help=argparse.SUPPRESS)
    a, _ = ap.parse_known_args()  # torch.distributed.launch adds --local_rank
    if a.worker:
        return worker_allreduce(a) if a.worker == "allreduce" else worker_fsdp2(a)

    backends = a.backends.split(",")
    parts = a.parts.split(",")
    if any(p not in PARTS for p in parts):
        sys.exit(f"torch_backend: --parts takes {', '.join(PARTS)}")
    if a.launcher == "ddpc-run" and not os.access(os.path.join(ROOT, "build/bin/ddpc-run"), os.X_OK):
        subprocess.run(["make", "-s", "build/bin/ddpc-run"], cwd=ROOT, check=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "build/python")) if uses_build_python(a.python) else None
    if "ddpc" in backends and subprocess.run(
            [a.python, "-c", "import ddpc_torch"], cwd=ROOT, stderr=subprocess.DEVNULL, env=env).returncode:
        sys.exit("torch_backend: backend ddpc: no ddpc_torch (make torch; for torch 2.x make torch2 or "
                 "pip install --no-build-isolation ./bridges/torch)")
    py = os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(ROOT + "/") else sys.executable
    command = shlex.join([py, os.path.relpath(os.path.abspath(__file__), ROOT)] + sys.argv[1:])
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    torch_version = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)"],
                                   stdout=subprocess.PIPE, text=True).stdout.strip()
    print(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {os.cpu_count()} CPUs, load {load}, "
          f"torch {torch_version}, {a.nproc} processes ({a.launcher}), backends {','.join(backends)}", flush=True)

    results = {}  # (row, backend) -> [values]
    rows = []
    for rep in range(a.reps):
        order = backends if rep % 2 == 0 else backends[::-1]
        for part in parts:
            for b in order:
                t0 = time.perf_counter()
                got = run_part(a, part, b)
                for row, v in got.items():
                    if row not in rows:
                        rows.append(row)
                    results.setdefault((row, b), []).append(v)
                print(f"# rep {rep + 1} {part:9s} {b:5s} ({time.perf_counter() - t0:4.1f} s): "
                      + ", ".join(f"{r.split(' | ')[0].split(',')[0]} {r.split(' | ')[1].split(' (')[0]} {fmt(v)}"
                                  for r, v in got.items()), flush=True)

    ratio = "gloo" in backends and "ddpc" in backends
    print(f"\nMedians over {a.reps} repetitions, {a.nproc} processes, backends alternated per repetition:\n")
    head = ["benchmark", "metric"] + backends + (["ddpc/gloo"] if ratio else [])
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join(["---", "---"] + ["---:"] * (len(head) - 2)) + "|")
    for row in rows:
        med = {b: statistics.median(results[(row, b)]) for b in backends}
        cells = row.split(" | ") + [fmt(med[b]) for b in backends]
        if ratio:
            cells.append(f"{med['ddpc'] / med['gloo']:.2f}" if med["gloo"] else "-")
        print("| " + " | ".join(cells) + " |")
    print(f"\nCommand: `{command}`")


if __name__ == "__main__":
    sys.exit(main())
