"""torch.distributed.checkpoint (DCP) on one backend: a sharded model saved
on one world size, loaded on another (torch 2.x).

Run under a launcher (ddpc-run or torchrun), twice, then compare:
    ddpc-run --nproc-per-node=2 PYTHON tests/py/torch_dcp.py --backend ddpc --dir D --save
    ddpc-run --nproc-per-node=3 PYTHON tests/py/torch_dcp.py --backend ddpc --dir D --load
    PYTHON tests/py/torch_dcp.py --compare GLOO_DIR DDPC_DIR

--save trains a small model sharded with FSDP2 (`fully_shard` on a CPU
DeviceMesh of every rank) with Adam for a few steps, then writes its
sharded model and optimizer state dicts with `dcp.save` (each rank its own
shards) and, from rank 0, the full (unsharded) state dicts gathered by
torch as D/reference.pt. --load builds the same model from another seed,
shards it over this (other) world size, loads D with `dcp.load` and
`set_state_dict`, gathers the full state dicts again and finds every tensor
equal, bit for bit, to the reference, on every rank; then trains one more
step, so the loaded shards are live. Prints "dcp: saved N tensors on W
ranks" / "dcp: loaded N tensors on W ranks, equal to what was saved" on
rank 0, and exits 1 naming the tensor that differs. --compare finds two
backends' references bit-identical (a 2-rank save: every sum is exact).
"""
import gc
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 4


def model(seed):
    """Odd shapes: the shards are uneven on 2 and on 3 ranks."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 17), nn.ReLU(), nn.Linear(17, 9), nn.ReLU(), nn.Linear(9, 5))


def shard(m):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in m:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    return m


def train_step(m, opt, seed):
    g = torch.Generator().manual_seed(seed * 1000 + dist.get_rank())
    x, y = torch.randn(8, 12, generator=g), torch.randint(0, 5, (8,), generator=g)
    opt.zero_grad()
    nn.functional.cross_entropy(m(x), y).backward()
    opt.step()


def full(m, opt):
    """The full state dicts, gathered by torch, as {name: tensor}."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    msd, osd = get_state_dict(m, opt, options=StateDictOptions(full_state_dict=True))
    out = {f"model.{k}": v.detach().clone() for k, v in msd.items()}
    for fqn, st in osd["state"].items():
        for k, v in st.items():
            out[f"optim.{fqn}.{k}"] = torch.as_tensor(v).detach().clone()
    return out


def save(a):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    m = shard(model(0))
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    for s in range(STEPS):
        train_step(m, opt, s)
    msd, osd = get_state_dict(m, opt)  # DTensors: this rank's shards
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=a.dir)
    ref = full(m, opt)
    if dist.get_rank() == 0:
        torch.save(ref, os.path.join(a.dir, "reference.pt"))
        print(f"dcp: saved {len(ref)} tensors on {dist.get_world_size()} ranks ({a.backend})", flush=True)
    return 0


def load(a):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    m = shard(model(1))  # other values: only the load can make them equal
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    msd, osd = get_state_dict(m, opt)  # the shards of this world size, to fill
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=a.dir)
    set_state_dict(m, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    ref = torch.load(os.path.join(a.dir, "reference.pt"))
    got = full(m, opt)
    bad = [k for k in sorted(set(ref) | set(got)) if k not in ref or k not in got or not torch.equal(ref[k], got[k])]
    for k in bad:
        print(f"dcp: rank {dist.get_rank()}: {k} differs from what was saved"
              + (f" (max diff {(ref[k].double() - got[k].double()).abs().max().item():.3g})"
                 if k in ref and k in got and ref[k].shape == got[k].shape else " (missing or reshaped)"),
              flush=True)
    local = sum(p.to_local().numel() for p in m.parameters())
    total = sum(p.numel() for p in m.parameters())
    if not 0 < local < total:
        bad.append("shards")
        print(f"dcp: rank {dist.get_rank()} holds {local} of {total} elements: not sharded", flush=True)
    train_step(m, opt, STEPS)  # the loaded shards train on
    flags = torch.tensor([len(bad)])
    dist.all_reduce(flags)
    if dist.get_rank() == 0 and not flags.item():
        print(f"dcp: loaded {len(ref)} tensors on {dist.get_world_size()} ranks, equal to what was saved "
              f"({a.backend})", flush=True)
    return 1 if flags.item() else 0


def compare(a_dir, b_dir):
    a = torch.load(os.path.join(a_dir, "reference.pt"))
    b = torch.load(os.path.join(b_dir, "reference.pt"))
    bad = [k for k in sorted(set(a) | set(b)) if k not in a or k not in b or not torch.equal(a[k], b[k])]
    for k in bad:
        print(f"DIFF {k}")
    print(f"compare: {len(a)} tensors, {'same' if not bad else 'DIFFERENT'} (bit-identical)")
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="ddpc")
    p.add_argument("--dir", help="the checkpoint's directory")
    p.add_argument("--save", action="store_true")
    p.add_argument("--load", action="store_true")
    p.add_argument("--compare", nargs=2, metavar="DIR")
    a = p.parse_args()
    if a.compare:
        return compare(*a.compare)
    if a.save == a.load or not a.dir:
        p.error("--dir D and one of --save, --load")
    dist.init_process_group(a.backend)
    rc = save(a) if a.save else load(a)
    gc.collect()  # free DDP/FSDP cycles first: see ddp_gloo.py
    dist.destroy_process_group()
    return rc


if __name__ == "__main__":
    sys.exit(main())
