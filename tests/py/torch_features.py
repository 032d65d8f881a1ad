"""PyTorch's data-parallel features on one backend, for comparison with another.

Run under a launcher (ddpc-run or torchrun), once per backend:
    ddpc-run --nproc-per-node=2 PYTHON tests/py/torch_features.py --backend ddpc --save ddpc.pt
    ddpc-run --nproc-per-node=2 PYTHON tests/py/torch_features.py --backend gloo --save gloo.pt
    PYTHON tests/py/torch_features.py --compare gloo.pt ddpc.pt [--exact]
Each feature trains a small model from the same seed on the same per-rank
data and records its parameters (and what else it produces) on rank 0; the
comparison finds them bit-identical (--exact: 2 ranks, where every sum is of
two terms and so exact in any order) or within float tolerance. A feature
torch cannot run here (FSDP on torch 1.13) is skipped and named, on both
backends alike. Prints "features: N ok, M skipped (...)" on rank 0.
"""
import gc
import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn

try:
    import ddpc_torch  # noqa: F401  (torch 2.x finds it by itself)
except ImportError:
    pass

from torch.nn.parallel import DistributedDataParallel as DDP

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
STEPS = 6


class WithUnused(nn.Module):
    """The MLP and a layer its forward never uses (find_unused_parameters)."""

    def __init__(self, body):
        super().__init__()
        self.body, self.unused = body, nn.Linear(4, 4)

    def forward(self, x):
        return self.body(x)


def mlp(seed=0, unused=False):
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4))
    return WithUnused(m) if unused else m


def batches(n=STEPS, extra=0):
    """This rank's data: the same on every backend, different per rank."""
    g = torch.Generator().manual_seed(100 + dist.get_rank())
    return [(torch.randn(8, 12, generator=g), torch.randint(0, 4, (8,), generator=g)) for _ in range(n + extra)]


def step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()


def params(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def train(ddp, data=None):
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    for x, y in data or batches():
        step(ddp, opt, x, y)
    return params(ddp.module)


# ---------------------------------------------------------------- features


def ddp_plain():
    return train(DDP(mlp()))


def ddp_static_graph():
    return train(DDP(mlp(), static_graph=True))


def ddp_find_unused_parameters():
    return train(DDP(mlp(unused=True), find_unused_parameters=True))


def ddp_gradient_as_bucket_view_small_buckets():
    return train(DDP(mlp(), gradient_as_bucket_view=True, bucket_cap_mb=0.0005))


def ddp_no_sync():
    ddp = DDP(mlp())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    data = batches()
    for i in range(0, len(data), 3):
        opt.zero_grad()
        for j, (x, y) in enumerate(data[i : i + 3]):
            if j < 2:
                with ddp.no_sync():
                    nn.functional.cross_entropy(ddp(x), y).backward()
            else:
                nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    return params(ddp.module)


def ddp_join_uneven_inputs():
    from torch.distributed.algorithms.join import Join

    ddp = DDP(mlp())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    with Join([ddp]):
        for x, y in batches(extra=dist.get_rank()):  # rank r trains r more batches
            step(ddp, opt, x, y)
    return params(ddp.module)


def hook_fp16_compress():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    ddp = DDP(mlp())
    ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    return train(ddp)


def hook_bf16_compress():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    # torch's DDP refuses it on CPU (1.13 and 2.13 alike: "BF16 all reduce
    # communication hook required CUDA 11+ and NCCL 2.10+")
    if not torch.cuda.is_available():
        return None
    ddp = DDP(mlp())
    ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    return train(ddp)


def hook_powersgd():
    """PowerSGD: collectives issued and waited inside futures' callbacks."""
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps

    ddp = DDP(mlp())
    state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2,
                             min_compression_rate=0.1, use_error_feedback=True, warm_start=True)
    ddp.register_comm_hook(state, ps.powerSGD_hook)
    return train(ddp)


def hook_post_local_sgd():
    from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as pl
    from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
    from torch.distributed.optim import PostLocalSGDOptimizer

    ddp = DDP(mlp())
    # each rank its own subgroup (torch 1.13 makes per-host ones only with
    # CUDA): after 2 iterations, local steps, averaged every 2 by the optimizer
    mine = [dist.new_group([r]) for r in range(dist.get_world_size())][dist.get_rank()]
    state = pl.PostLocalSGDState(process_group=None, subgroup=mine, start_localSGD_iter=2)
    ddp.register_comm_hook(state, pl.post_localSGD_hook)
    opt = PostLocalSGDOptimizer(optim=torch.optim.SGD(ddp.parameters(), lr=0.1),
                                averager=PeriodicModelAverager(period=2, warmup_steps=2))
    for x, y in batches():
        step(ddp, opt, x, y)
    return params(ddp.module)


def zero_redundancy_optimizer():
    from torch.distributed.optim import ZeroRedundancyOptimizer

    ddp = DDP(mlp())
    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
    for x, y in batches():
        step(ddp, opt, x, y)
    opt.consolidate_state_dict(to=0)
    out = params(ddp.module)
    if dist.get_rank() == 0:
        st = opt.state_dict()["state"]
        for i in sorted(st):
            out[f"optim.{i}.exp_avg"] = st[i]["exp_avg"].clone()
    return out


def fsdp_full_state_dict():
    if not TORCH2:
        return None
    from torch.distributed.fsdp import FullStateDictConfig, StateDictType
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    model = FSDP(mlp(), device_id=torch.device("cpu"), use_orig_params=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches():
        step(model, opt, x, y)
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                              FullStateDictConfig(offload_to_cpu=False, rank0_only=False)):
        return {k: v.detach().clone() for k, v in model.state_dict().items()}


def fsdp2_fully_shard():
    if not TORCH2:
        return None
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = mlp()
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches():
        step(model, opt, x, y)
    sharded = get_model_state_dict(model)  # DTensors: this rank's shards
    out = {k: v.detach().clone() for k, v in
           get_model_state_dict(model, options=StateDictOptions(full_state_dict=True)).items()}
    out["shards_on_this_rank"] = torch.tensor([v.to_local().numel() for v in sharded.values()])
    return out


def dtensor_ops():
    if not TORCH2:
        return None
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    n = dist.get_world_size()
    out = {}
    meshes = [("1d", init_device_mesh("cpu", (n,)))]
    if n % 2 == 0 and n >= 4:
        meshes.append(("2d", init_device_mesh("cpu", (2, n // 2), mesh_dim_names=("dp", "tp"))))
    torch.manual_seed(7)
    a, b = torch.randn(8 * n, 6), torch.randn(6, 4 * n)
    for name, mesh in meshes:
        shard = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
        da = distribute_tensor(a, mesh, shard)
        db = distribute_tensor(b, mesh, [Replicate()] * mesh.ndim)
        out[f"{name}.matmul"] = (da @ db).full_tensor()
        out[f"{name}.sum"] = da.sum().full_tensor().reshape(1)
        out[f"{name}.redistribute"] = da.redistribute(mesh, [Replicate()] * mesh.ndim).to_local()
    return out


def object_collectives_and_groups():
    r, n = dist.get_rank(), dist.get_world_size()
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": r, "word": "x" * (r + 1)})
    got = [None]
    dist.broadcast_object_list(got if r else [{"from": 0}], src=0)
    out = {"objects": torch.tensor([o["rank"] + len(o["word"]) for o in objs])}
    g = dist.new_group(ranks=list(range(0, n, 2)), backend=dist.get_backend())
    if r % 2 == 0:
        t = torch.tensor([float(r + 1)])
        dist.all_reduce(t, group=g)
        out["new_group_sum"] = t
    size = 1 if n % 2 else 2
    if TORCH2:
        sub, _ = dist.new_subgroups(group_size=size)
    else:  # torch 1.13's new_subgroups wants CUDA: the same groups by hand
        sub = [dist.new_group(list(range(i, i + size))) for i in range(0, n, size)][r // size]
    t = torch.tensor([float(r + 1)])
    dist.all_reduce(t, group=sub)
    out["subgroup_sum_rank0"] = t
    return out


FEATURES = [ddp_plain, ddp_static_graph, ddp_find_unused_parameters,
            ddp_gradient_as_bucket_view_small_buckets, ddp_no_sync, ddp_join_uneven_inputs,
            hook_fp16_compress, hook_bf16_compress, hook_powersgd, hook_post_local_sgd,
            zero_redundancy_optimizer, fsdp_full_state_dict, fsdp2_fully_shard, dtensor_ops,
            object_collectives_and_groups]


def run(args):
    dist.init_process_group(args.backend)
    results, skipped = {}, []
    only = set(args.only.split(",")) if args.only else None
    for f in FEATURES:
        if only and f.__name__ not in only:
            continue
        r = f()
        dist.barrier()
        if r is None:
            skipped.append(f.__name__)
        else:
            results[f.__name__] = r
    if dist.get_rank() == 0:
        torch.save({"results": results, "skipped": skipped, "world": dist.get_world_size()}, args.save)
        print(f"features: {len(results)} ok, {len(skipped)} skipped ({', '.join(skipped) or 'none'}) "
              f"on {args.backend}, torch {torch.__version__}", flush=True)
    gc.collect()  # free DDP/FSDP cycles first: see ddp_gloo.py
    dist.destroy_process_group()


def compare(a_path, b_path, exact):
    a, b = torch.load(a_path), torch.load(b_path)
    bad = []
    if sorted(a["results"]) != sorted(b["results"]):
        bad.append(f"features differ: {sorted(a['results'])} vs {sorted(b['results'])}")
    for feat in sorted(set(a["results"]) & set(b["results"])):
        x, y = a["results"][feat], b["results"][feat]
        # fp16 sums of 3+ terms round differently in another order: within
        # fp16's own precision (2^-11) over the steps, else float32's
        tol = 1e-3 if "fp16" in feat else 1e-4
        for k in sorted(set(x) | set(y)):
            if k not in x or k not in y:
                bad.append(f"{feat}.{k}: only on one backend")
            elif exact and not torch.equal(x[k], y[k]):
                bad.append(f"{feat}.{k}: not bit-identical (max diff {(x[k].double() - y[k].double()).abs().max().item():.3g})")
            elif not exact and not torch.allclose(x[k].double(), y[k].double(), rtol=tol, atol=tol):
                bad.append(f"{feat}.{k}: differs beyond tolerance {tol} "
                           f"(max diff {(x[k].double() - y[k].double()).abs().max().item():.3g})")
    for line in bad:
        print("DIFF", line)
    kind = "bit-identical" if exact else "within tolerance"
    print(f"compare: {len(a['results'])} features, {'same' if not bad else 'DIFFERENT'} ({kind})")
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="ddpc")
    p.add_argument("--save")
    p.add_argument("--only", help="comma-separated feature names")
    p.add_argument("--compare", nargs=2)
    p.add_argument("--exact", action="store_true")
    args = p.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare, args.exact))
    run(args)


if __name__ == "__main__":
    main()
