"""init_process_group's device-map form with 'ddpc' for CPU tensors (torch 2.x).

Run under a launcher (ddpc-run or torchrun):
    ddpc-run --nproc-per-node=2 PYTHON tests/py/torch_device_map.py cpu:ddpc
    ddpc-run --nproc-per-node=2 PYTHON tests/py/torch_device_map.py cpu:ddpc,cuda:nccl

Checks what a user would do with it: the group's CPU backend is ddpc's
class, and collectives on CPU tensors (all_reduce, the tensor all-gather,
broadcast of objects, a new_group that inherits the map, DDP's gradients)
give the right results. Where torch itself refuses the form (its CPU build
has no NCCL; its CUDA build on a machine without a GPU: torch 2.x creates
every device's backend at init_process_group), the same form with gloo in
ddpc's place is refused alike: the script prints "device map: torch refuses
..." with torch's words on rank 0 and exits 0, since the refusal is torch's;
any other error fails it. Prints "device map <spec>: ok" on rank 0.
"""
import gc
import os
import sys

import warnings

import torch
import torch.distributed as dist
import torch.nn as nn


def refusal(spec):
    """torch's error at init_process_group(spec), or None when it accepts it."""
    try:
        dist.init_process_group(spec)
        return None
    except (RuntimeError, ValueError) as e:
        return f"{type(e).__name__}: {e}"


def main():
    spec = sys.argv[1]
    warnings.filterwarnings("ignore", category=FutureWarning)  # 2.13: all_gather_into_tensor's rename
    if "ddpc" not in spec:
        sys.exit("torch_device_map.py: the spec must map a device to ddpc")
    err = refusal(spec)
    if err is not None:
        if "cuda:" not in spec:
            raise SystemExit(f"device map {spec}: refused: {err}")
        # the same map with gloo: torch must refuse it alike, before any backend
        # of ours is involved (init_process_group failed before its barrier)
        gloo_err = refusal(spec.replace("ddpc", "gloo"))
        if gloo_err is None or gloo_err.split(":")[0] != err.split(":")[0]:
            raise SystemExit(f"device map {spec}: refused ({err}), but gloo's map is not alike ({gloo_err})")
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"device map: torch {torch.__version__} refuses '{spec}' as it refuses "
                  f"'{spec.replace('ddpc', 'gloo')}': {err.splitlines()[0]}", flush=True)
        return 0

    r, n = dist.get_rank(), dist.get_world_size()
    world = dist.group.WORLD
    cpu = world._get_backend(torch.device("cpu"))
    if type(cpu).__name__ != "ProcessGroupDDPC":
        raise SystemExit(f"device map {spec}: the CPU backend is {type(cpu).__name__}, not ddpc's")

    t = torch.full((5,), float(r + 1))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((5,), float(n * (n + 1) // 2))), t
    out = torch.empty(2 * n)
    dist.all_gather_into_tensor(out, torch.tensor([float(r), float(-r)]))
    assert out.tolist() == [v for i in range(n) for v in (float(i), float(-i))], out
    objs = [{"from": 0}] if r == 0 else [None]
    dist.broadcast_object_list(objs, src=0)
    assert objs == [{"from": 0}], objs

    g = dist.new_group(list(range(n)))  # inherits the device map
    if type(g._get_backend(torch.device("cpu"))).__name__ != "ProcessGroupDDPC":
        raise SystemExit(f"device map {spec}: new_group's CPU backend is not ddpc's")
    t = torch.tensor([float(r)])
    dist.all_reduce(t, group=g)
    assert t.item() == n * (n - 1) / 2, t

    torch.manual_seed(0)
    ddp = nn.parallel.DistributedDataParallel(nn.Linear(6, 3))
    ddp(torch.full((4, 6), float(r))).sum().backward()
    grads = [p.grad.clone() for p in ddp.parameters()]
    for p in grads:
        q = p.clone()
        dist.all_reduce(q, op=dist.ReduceOp.MAX)
        assert torch.equal(p, q), "DDP's gradients differ between ranks"

    if "cuda:" in spec and torch.cuda.is_available():  # the other device's backend, where there is one
        torch.cuda.set_device(r % torch.cuda.device_count())
        c = torch.ones(3, device="cuda")
        dist.all_reduce(c)
        assert c.tolist() == [float(n)] * 3, c
    dist.barrier()
    if r == 0:
        print(f"device map {spec}: ok ({n} ranks, CPU tensors on ddpc, torch {torch.__version__})", flush=True)
    gc.collect()  # free DDP/FSDP cycles first: see ddp_gloo.py
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
