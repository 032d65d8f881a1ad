"""A peer dies: the survivors' calls on backend 'ddpc' fail within the
process group's timeout, naming the lost rank.

    ddpc-run --nproc-per-node=3 /usr/bin/python3 tests/py/torch_fail.py
Rank 1 exits right after a first all_reduce (TORCH_FAIL_MODE=exit, the
default) or goes silent for 12 s (=silent); ranks 0 and 2 then call
all_reduce (timeout 5 s) and print "failed after S s: MESSAGE" and exit 0
when it raised in time, 1 otherwise. TORCH_FAIL_MODE=mismatch: the ranks
call all_reduce with different sizes and each must get ddpc's mismatch
error (exit 0). TORCH_FAIL_MODE=call_timeout: the group's timeout is 60 s,
rank 1 goes silent, and ranks 0 and 2 call all_reduce with its own timeout
option at 2 s: it must fail ("Timed out") in under 10 s. Also checks a second import of
ddpc_torch is harmless and that init through file:// works.
"""
import datetime
import importlib
import os
import sys
import time

import torch
import torch.distributed as dist

import ddpc_torch
importlib.reload(ddpc_torch)  # registering twice must be harmless

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
init = os.environ.get("TORCH_FAIL_INIT", "env://")
mode = os.environ.get("TORCH_FAIL_MODE", "exit")
group_timeout = 60 if mode == "call_timeout" else 5
dist.init_process_group("ddpc", init_method=init, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=group_timeout))
t = torch.ones(4)
dist.all_reduce(t)
assert t.tolist() == [float(world)] * 4, t
if os.environ.get("TORCH_FAIL_MODE") == "mismatch":  # ranks disagree on the count
    try:
        dist.all_reduce(torch.ones(4 + (rank == 1)))
        print(f"rank {rank}: mismatched all_reduce succeeded", flush=True)
        sys.exit(1)
    except RuntimeError as e:
        print(f"rank {rank}: mismatch: {e}", flush=True)
        sys.exit(0 if "mismatch" in str(e) else 1)
if rank == 1:
    if mode in ("silent", "call_timeout"):
        time.sleep(12)
    os._exit(0)
start = time.monotonic()
try:
    if mode == "call_timeout":  # the call's own timeout, below the group's
        opts = dist.AllreduceOptions()
        opts.timeout = datetime.timedelta(seconds=2)
        dist.distributed_c10d._get_default_group().allreduce([torch.ones(1 << 20)], opts).wait()
    else:
        dist.all_reduce(torch.ones(1 << 20))
    print(f"rank {rank}: all_reduce succeeded without rank 1", flush=True)
    sys.exit(1)
except RuntimeError as e:
    took = time.monotonic() - start
    print(f"rank {rank}: failed after {took:.1f} s: {e}", flush=True)
    sys.exit(0 if took < 10 else 1)
