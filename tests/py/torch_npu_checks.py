"""ddpc_torch_npu's device and its 'hccl' backend, one process per rank
(ddpc-run or torchrun): torch.npu's calls, npu tensors against the same
work on the CPU (bit for bit), views, in-place and out= operators, the
refusals, then every collective on npu tensors through backend 'hccl'.
Prints `npu checks ok on N ranks` at the end on rank 0."""
import gc
import os

import torch
import torch.distributed as dist


def expect_error(fn, words):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  the message is what is checked
        msg = str(e)
        assert all(w in msg for w in words), f"error {msg!r} lacks {words}"
        return
    raise AssertionError(f"no error, expected one naming {words}")


def device_checks(local_rank):
    assert torch._C._get_privateuse1_backend_name() == "npu"
    assert torch.npu.is_available() and torch.npu.device_count() == int(os.environ["LOCAL_WORLD_SIZE"])
    torch.npu.set_device(f"npu:{local_rank}")
    assert torch.npu.current_device() == local_rank
    dev = torch.device(f"npu:{local_rank}")
    expect_error(lambda: torch.npu.set_device(torch.npu.device_count()), ["does not exist", "npu"])
    torch.npu.synchronize()
    torch.npu.manual_seed(1)
    a = torch.randn(64, 33)
    torch.npu.manual_seed(1)
    b = torch.randn(64, 33, device=dev)
    assert b.device == dev and b.is_npu and torch.equal(a, b.cpu()), "seeded randn differs from the CPU's"
    # arithmetic, reductions, matmul, autograd: the CPU's kernels, bit for bit
    w = torch.randn(33, 7)
    x = a.clone().requires_grad_()
    xn = a.to(dev).requires_grad_()
    y = torch.nn.functional.log_softmax(x @ w, 1).sum() * 3
    yn = torch.nn.functional.log_softmax(xn @ w.npu(), 1).sum() * 3
    y.backward()
    yn.backward()
    assert yn.device == dev and torch.equal(y, yn.cpu()) and torch.equal(x.grad, xn.grad.cpu())
    # views share memory; in-place through a view; out=; non-contiguous copies
    n = torch.arange(12, dtype=torch.float32, device=dev)
    v = n.view(3, 4).t()[1:3]
    v.add_(100)
    assert n[1].item() == 101 and n[9].item() == 109 and n[0].item() == 0, n
    out = torch.empty(0, device=dev)
    torch.mul(n, 2, out=out)
    assert out.shape == (12,) and out.device == dev and out[1].item() == 202
    assert torch.equal(v.contiguous().cpu(), n.cpu().view(3, 4).t()[1:3])
    assert torch.nn.Linear(3, 2).npu().weight.device.type == "npu"
    # memory figures follow npu tensors
    torch.npu.reset_peak_memory_stats()
    before = torch.npu.memory_allocated()
    big = torch.empty(1 << 20, device=dev)
    assert torch.npu.memory_allocated() >= before + (4 << 20) and torch.npu.max_memory_allocated() >= before + (4 << 20)
    del big
    assert torch.npu.memory_allocated() == before
    # an operator with no CPU kernel is refused by name
    expect_error(lambda: torch.ops.aten._fused_dropout(n, 0.5), ["_fused_dropout", "not served"])
    return dev


def collective_checks(dev, rank, world):
    assert dist.get_backend() == "hccl"
    t = torch.full((1009,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    assert t.device == dev and torch.all(t == world * (world + 1) / 2).item()
    b = torch.arange(7, device=dev, dtype=torch.int64) * (rank + 1)
    dist.broadcast(b, 0)
    assert torch.equal(b.cpu(), torch.arange(7))
    parts = [torch.empty(5, device=dev) for _ in range(world)]
    dist.all_gather(parts, torch.full((5,), float(rank), device=dev))
    assert all(torch.all(p == i).item() for i, p in enumerate(parts))
    whole = torch.empty(5 * world, device=dev)
    dist.all_gather_into_tensor(whole, torch.full((5,), float(rank), device=dev))
    assert torch.equal(whole.cpu(), torch.arange(world).repeat_interleave(5).float())
    rs = torch.empty(3, device=dev)
    dist.reduce_scatter_tensor(rs, torch.arange(3 * world, dtype=torch.float32, device=dev))
    assert torch.equal(rs.cpu(), torch.arange(3 * rank, 3 * rank + 3).float() * world)
    a2a = torch.empty(world, device=dev)
    dist.all_to_all_single(a2a, torch.full((world,), float(rank), device=dev))
    assert torch.equal(a2a.cpu(), torch.arange(world).float())
    nc = torch.ones(4, 6, device=dev).t()  # not contiguous
    dist.all_reduce(nc)
    assert torch.all(nc == world).item()
    work = dist.all_reduce(torch.ones(3, device=dev), async_op=True)
    work.wait()
    dist.barrier()
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    assert [o["rank"] for o in objs] == list(range(world))


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = device_checks(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(backend="hccl", init_method="env://")
    collective_checks(dev, rank, world)
    gc.collect()  # free DDP/FSDP cycles first: see ddp_gloo.py
    dist.destroy_process_group()
    if rank == 0:
        print(f"npu checks ok on {world} ranks", flush=True)


if __name__ == "__main__":
    main()
