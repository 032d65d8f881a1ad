"""Checks torch.distributed's 'ddpc' backend against references, rank by rank.

Run under a launcher (ddpc-run or torchrun), any world size:
    build/bin/ddpc-run --nproc-per-node=3 /usr/bin/python3 tests/py/torch_backend.py
Every collective torch.distributed offers on CPU tensors, for every dtype it
applies to, at sizes 0, 1, odd, prime and large; async works and futures;
non-contiguous and complex tensors; point to point; subgroups; object
collectives. Each rank's input is a function of its rank, so every rank
computes the exact expected result itself. Prints "torch_backend: N checks
ok" on rank 0, or raises naming the first wrong case.
"""
import gc
import os
import sys

import torch
import torch.distributed as dist

import ddpc_torch  # noqa: F401  registers the backend

BACKEND = os.environ.get("DDPC_TORCH_BACKEND", "ddpc")
SIZES = [0, 1, 7, 1009, (1 << 16) + 3]
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
checks = 0


def data(r, n, dtype, mod=7):
    """Rank r's input: small integers, exact in every dtype."""
    v = (torch.arange(n, dtype=torch.int64) * (r + 1) + r) % mod
    if dtype == torch.bool:
        return (v % 2).to(torch.bool)
    return v.to(dtype)


def expect(ok, what):
    global checks
    if not ok:
        raise AssertionError(f"rank {dist.get_rank()}: {what}")
    checks += 1


def same(a, b, what):
    expect(a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), f"{what}: got {a[:8]} want {b[:8]}")


def reference(op, ins):
    acc = ins[0].clone()
    for x in ins[1:]:
        if op == dist.ReduceOp.SUM:
            acc = acc | x if acc.dtype == torch.bool else acc + x
        elif op == dist.ReduceOp.PRODUCT:
            acc = acc & x if acc.dtype == torch.bool else acc * x
        elif op == dist.ReduceOp.MIN:
            acc = torch.minimum(acc, x)
        elif op == dist.ReduceOp.MAX:
            acc = torch.maximum(acc, x)
        elif op == dist.ReduceOp.BAND:
            acc = acc & x
        elif op == dist.ReduceOp.BOR:
            acc = acc | x
        elif op == dist.ReduceOp.BXOR:
            acc = acc ^ x
    return acc


def ops_for(dtype):
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    if dtype in INTS or dtype == torch.bool:
        ops += [dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR]
    return ops


def reductions(rank, world):
    for dtype in FLOATS + INTS + [torch.bool]:
        for n in SIZES:
            for op in ops_for(dtype):
                mod = 2 if op == dist.ReduceOp.PRODUCT else 7  # products stay exact
                ins = [data(r, n, dtype, mod) for r in range(world)]
                want = reference(op, ins)
                t = ins[rank].clone()
                dist.all_reduce(t, op=op)
                same(t, want, f"all_reduce {dtype} n={n} {op}")
                if n in (1, 1009):
                    root = n % world
                    t = ins[rank].clone()
                    dist.reduce(t, root, op=op)
                    same(t, want if rank == root else ins[rank], f"reduce {dtype} n={n} {op} root={root}")
                    outs = [torch.empty(n, dtype=dtype) for _ in range(1)]
                    blocks = [data(r * world + j, n, dtype, mod) for j in range(world) for r in [rank]]
                    out = torch.empty(n, dtype=dtype)
                    dist.reduce_scatter(out, blocks, op=op)
                    allb = [[data(r * world + j, n, dtype, mod) for j in range(world)] for r in range(world)]
                    same(out, reference(op, [allb[r][rank] for r in range(world)]), f"reduce_scatter {dtype} {op}")
                    del outs
        if dtype in FLOATS:  # AVG of small integers summing to a multiple of world is exact
            t = torch.full((5,), float(world * (rank + 1)), dtype=dtype)
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            same(t, torch.full((5,), float(world * (world + 1) / 2), dtype=dtype), f"all_reduce {dtype} AVG")


def movement(rank, world):
    for dtype in FLOATS + INTS + [torch.bool, torch.complex64]:
        for n in SIZES:
            mk = (lambda r: torch.complex(data(r, n, torch.float32), data(r + 1, n, torch.float32))) \
                if dtype == torch.complex64 else (lambda r: data(r, n, dtype))
            root = (n + 1) % world
            t = mk(rank) if rank == root else torch.zeros(n, dtype=dtype)
            dist.broadcast(t, root)
            same(t, mk(root), f"broadcast {dtype} n={n}")
            outs = [torch.empty(n, dtype=dtype) for _ in range(world)]
            dist.all_gather(outs, mk(rank))
            for r in range(world):
                same(outs[r], mk(r), f"all_gather {dtype} n={n} block {r}")
            if dtype == torch.complex64:
                continue
            big = torch.empty(world * n, dtype=dtype)
            dist._all_gather_base(big, mk(rank))
            same(big, torch.cat([mk(r) for r in range(world)]), f"_all_gather_base {dtype} n={n}")
            g = [torch.empty(n, dtype=dtype) for _ in range(world)] if rank == root else None
            dist.gather(mk(rank), g, dst=root)
            if rank == root:
                for r in range(world):
                    same(g[r], mk(r), f"gather {dtype} n={n} block {r}")
            out = torch.empty(n, dtype=dtype)
            dist.scatter(out, [mk(10 + r) for r in range(world)] if rank == root else None, src=root)
            same(out, mk(10 + rank), f"scatter {dtype} n={n}")
            # all_to_all: rank r's block j is data(r*world+j)
            ins = [data(rank * world + j, n, dtype) for j in range(world)]
            outs = [torch.empty(n, dtype=dtype) for _ in range(world)]
            dist.all_to_all(outs, ins)
            for j in range(world):
                same(outs[j], data(j * world + rank, n, dtype), f"all_to_all {dtype} n={n} from {j}")
            o = torch.empty(world * n, dtype=dtype)
            dist.all_to_all_single(o, torch.cat(ins))
            same(o, torch.cat([data(j * world + rank, n, dtype) for j in range(world)]), f"all_to_all_single {dtype}")


def uneven(rank, world):
    # rank r sends (r + j) % 3 rows of 2 columns to rank j
    rows = lambda r, j: (r + j) % 3
    src = torch.cat([torch.full((rows(rank, j), 2), float(100 * rank + j)) for j in range(world)])
    out = torch.empty(sum(rows(j, rank) for j in range(world)), 2)
    dist.all_to_all_single(out, src, [rows(j, rank) for j in range(world)], [rows(rank, j) for j in range(world)])
    want = torch.cat([torch.full((rows(j, rank), 2), float(100 * j + rank)) for j in range(world)])
    same(out, want, "all_to_all_single uneven")
    ins = [torch.full((rank + j + 1,), float(rank)) for j in range(world)]
    outs = [torch.empty(j + rank + 1) for j in range(world)]
    dist.all_to_all(outs, ins)
    for j in range(world):
        same(outs[j], torch.full((j + rank + 1,), float(j)), f"all_to_all uneven from {j}")


def views_and_async(rank, world):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) * (rank + 1)
    t = base.t()  # not contiguous
    expect(not t.is_contiguous(), "a transposed tensor is not contiguous")
    dist.all_reduce(t)
    same(t, (torch.arange(24, dtype=torch.float32).reshape(4, 6) * sum(range(1, world + 1))).t(), "non-contiguous")
    works = []
    ts = [torch.full((100,), float(rank + k)) for k in range(8)]
    for t in ts:
        works.append(dist.all_reduce(t, async_op=True))
    for k, w in enumerate(works):
        w.wait()
        expect(w.is_completed() and w.is_success(), "work completed")
        same(ts[k], torch.full((100,), float(sum(range(world)) + world * k)), f"async #{k}")
    t = torch.ones(3)
    fut = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    same(fut.wait(), torch.full((3,), 2.0 * world), "future then")
    # a collective issued and waited inside a future's callback, two deep
    # (DDP's PowerSGD hook does this; it hung when callbacks ran on the
    # thread that completes the works)
    a, b, c = torch.ones(4), torch.ones(4), torch.ones(4)

    def inner(_):
        return dist.all_reduce(c, async_op=True).get_future().wait()[0]

    def outer(_):
        return dist.all_reduce(b, async_op=True).get_future().then(inner).wait()

    got = dist.all_reduce(a, async_op=True).get_future().then(outer).wait()
    same(got, torch.full((4,), float(world)), "collective inside a future's callback")
    same(b, torch.full((4,), float(world)), "the callback's own collective")
    ts = [torch.full((3, 2), float(rank)), torch.full((5,), float(rank + 1))]
    if hasattr(dist, "all_reduce_coalesced"):  # deprecated in torch 2.x
        dist.all_reduce_coalesced(ts)
    else:
        with dist._coalescing_manager():
            for t in ts:
                dist.all_reduce(t)
    same(ts[0], torch.full((3, 2), float(sum(range(world)))), "all_reduce_coalesced 0")
    same(ts[1], torch.full((5,), float(sum(range(1, world + 1)))), "all_reduce_coalesced 1")
    dist.barrier()
    expect(dist.get_backend() == BACKEND, "backend name")


def p2p(rank, world):
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for n in [0, 1, 1009, 100003]:
        out, got = data(rank, n, torch.float32), torch.empty(n)
        if rank % 2 == 0:
            dist.send(out, nxt)
            dist.recv(got, prv)
        else:
            dist.recv(got, prv)
            dist.send(out, nxt)
        same(got, data(prv, n, torch.float32), f"send/recv n={n}")
    for n in [10, 1 << 22]:  # 16 MiB: more than any buffer between two ranks
        got = torch.empty(n)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, data(rank, n, torch.float32), nxt),
                                       dist.P2POp(dist.irecv, got, prv)])
        for q in reqs:
            q.wait()
        same(got, data(prv, n, torch.float32), f"batch_isend_irecv n={n}")
    got = torch.empty(3)
    if rank == 0:  # from any source: each other rank once, in any order
        seen = sorted(int(dist.recv(got)) for _ in range(1, world))
        expect(seen == list(range(1, world)), f"recv from any source saw {seen}")
    else:
        dist.send(torch.full((3,), float(rank)), 0)
    got = torch.empty(4)
    if rank == 0:
        for r in range(1, world):
            dist.isend(torch.full((4,), float(r)), r, tag=7).wait()
    else:
        dist.irecv(got, 0, tag=7).wait()
        same(got, torch.full((4,), float(rank)), "isend/irecv with a tag")


def tag_exchange(rank, g, name):
    """Rank 0 sends rank 1 tags 1-4 (sizes 0, 1, odd, large) and then 11, 12;
    rank 1 receives them out of order (4, 2, 3, 1 posted, waited for last
    first; 12 from any source before 11). Only isend on the sender: gloo's
    send waits for the matching recv to be posted. Rank 1's tensors."""
    sizes = {1: 0, 2: 1, 3: 1009, 4: 100003}
    if rank == 0:
        reqs = [dist.isend(data(10 + t, n, torch.float32, 101), 1, group=g, tag=t) for t, n in sizes.items()]
        reqs += [dist.isend(torch.full((2,), float(t)), 1, group=g, tag=t) for t in (11, 12)]
        for q in reqs:
            q.wait()
        return []
    if rank != 1:
        return []
    bufs = {t: torch.full((n,), -1.0) for t, n in sizes.items()}
    reqs = [dist.irecv(bufs[t], 0, group=g, tag=t) for t in (4, 2, 3, 1)]
    for q in reversed(reqs):
        q.wait()
    for t, n in sizes.items():
        same(bufs[t], data(10 + t, n, torch.float32, 101), f"{name}: tag {t} received out of order")
    a, b = torch.empty(2), torch.empty(2)
    src = dist.recv(a, group=g, tag=12)  # any source: rank 0's tag 12, past its tag 11
    dist.recv(b, 0, group=g, tag=11)
    expect(src == 0, f"{name}: recv of tag 12 from any source names rank {src}")
    same(a, torch.full((2,), 12.0), f"{name}: tag 12 from any source")
    same(b, torch.full((2,), 11.0), f"{name}: tag 11 after it")
    return [bufs[t] for t in sizes] + [a, b]


def tags(rank, world):
    """Send/recv with tags out of order on this backend, and the same on
    gloo: rank 1 must receive the same tensors from both."""
    gloo = dist.new_group(backend="gloo")
    mine = tag_exchange(rank, None, BACKEND)
    theirs = tag_exchange(rank, gloo, "gloo")
    expect(len(mine) == len(theirs), f"tags: {len(mine)} tensors on {BACKEND}, {len(theirs)} on gloo")
    for k, (x, y) in enumerate(zip(mine, theirs)):
        same(x, y, f"tags: tensor {k} on {BACKEND} vs gloo")
    dist.destroy_process_group(gloo)


def tensor_forms(rank, world):
    """torch 2.x: the tensor forms, coalesced, functional collectives, float8."""
    if not hasattr(dist, "all_gather_into_tensor"):
        return
    for n in [0, 1, 7, 1009]:
        x = data(rank, n, torch.float32)
        out = torch.empty(n * world)
        dist.all_gather_into_tensor(out, x)
        same(out, torch.cat([data(r, n, torch.float32) for r in range(world)]), f"all_gather_into_tensor n={n}")
        big = torch.cat([data(rank * world + k, n, torch.float32) for k in range(world)])
        got = torch.empty(n)
        dist.reduce_scatter_tensor(got, big)
        want = sum(data(r * world + rank, n, torch.float32) for r in range(world))
        same(got, want if n else torch.empty(0), f"reduce_scatter_tensor n={n}")
    if not hasattr(dist, "_coalescing_manager"):  # torch 1.13: the rest is 2.x's
        return
    # coalesced, as FSDP issues them
    ins = [data(rank, n, torch.float32) for n in (3, 5)]
    outs = [torch.empty(n * world) for n in (3, 5)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    for o, n in zip(outs, (3, 5)):
        same(o, torch.cat([data(r, n, torch.float32) for r in range(world)]), f"coalesced all_gather n={n}")
    bigs = [torch.cat([data(rank * world + k, n, torch.float32) for k in range(world)]) for n in (3, 5)]
    gots = [torch.empty(n) for n in (3, 5)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for g, b in zip(gots, bigs):
            dist.reduce_scatter_tensor(g, b)
    cm.wait()
    for g, n in zip(gots, (3, 5)):
        same(g, sum(data(r * world + rank, n, torch.float32) for r in range(world)), f"coalesced reduce_scatter n={n}")
    # functional collectives (what DTensor and torch.compile issue)
    import torch.distributed._functional_collectives as funcol

    t = funcol.all_reduce(torch.full((6,), float(rank)), "sum", dist.group.WORLD)
    same(funcol.wait_tensor(t), torch.full((6,), float(sum(range(world)))), "funcol all_reduce")
    t = funcol.all_gather_tensor(torch.full((2,), float(rank)), 0, dist.group.WORLD)
    same(funcol.wait_tensor(t), torch.cat([torch.full((2,), float(r)) for r in range(world)]), "funcol all_gather")
    # float8 moves as bytes; reducing it is refused by name
    if hasattr(torch, "float8_e4m3fn"):
        f8 = torch.full((5,), float(rank + 1)).to(torch.float8_e4m3fn)
        dist.broadcast(f8, src=0)
        expect(torch.equal(f8.view(torch.uint8), torch.full((5,), 1.0).to(torch.float8_e4m3fn).view(torch.uint8)),
               "broadcast float8")
        out = torch.empty(5 * world, dtype=torch.float8_e4m3fn)
        dist.all_gather_into_tensor(out, torch.full((5,), float(rank + 1)).to(torch.float8_e4m3fn))
        expect(torch.equal(out.float(), torch.cat([torch.full((5,), float(r + 1)) for r in range(world)])),
               "all_gather float8")
        if BACKEND == "ddpc":
            try:
                dist.all_reduce(f8)
                expect(False, "all_reduce of float8 is refused")
            except RuntimeError as e:
                expect("Float8" in str(e) and "not supported" in str(e), f"float8 all_reduce named: {e}")


def objects(rank, world):
    out = [None] * world
    dist.all_gather_object(out, {"rank": rank, "s": "x" * rank})
    expect(out == [{"rank": r, "s": "x" * r} for r in range(world)], "all_gather_object")
    lst = [("from", 1), None] if rank == 1 % world else [None, None]
    dist.broadcast_object_list(lst, src=1 % world)
    expect(lst == [("from", 1), None], "broadcast_object_list")
    g = [None] * world if rank == 0 else None
    dist.gather_object(rank * 3, g, dst=0)
    expect(rank != 0 or g == [r * 3 for r in range(world)], "gather_object")
    got = [None]
    dist.scatter_object_list(got, [f"to{r}" for r in range(world)] if rank == 0 else None, src=0)
    expect(got == [f"to{rank}"], "scatter_object_list")


def subgroups(rank, world):
    members = [r for r in range(world) if r % 2 == 0]
    g = dist.new_group(members)
    t = torch.full((9,), float(rank + 1))
    if rank in members:
        dist.all_reduce(t, group=g)
        same(t, torch.full((9,), float(sum(r + 1 for r in members))), "subgroup all_reduce")
    else:
        same(t, torch.full((9,), float(rank + 1)), "non-member untouched")
    t = torch.full((2,), float(rank))
    dist.all_reduce(t)  # the world group still works beside it
    same(t, torch.full((2,), float(sum(range(world)))), "world after subgroup")


def main():
    dist.init_process_group(BACKEND, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    for part in (reductions, movement, uneven, views_and_async, tensor_forms, p2p, tags, objects, subgroups):
        part(rank, world)
    dist.barrier()
    if rank == 0:
        print(f"torch_backend: {checks} checks ok on {world} ranks ({BACKEND})")
    gc.collect()  # free DDP/FSDP cycles first: see ddp_gloo.py
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
