#!/usr/bin/python3
"""Runs PyTorch's own distributed test suite against a backend.

    /usr/bin/python3 tests/py/dist_suite.py --backend ddpc --world-size 2 [--subset ci] [-k PATTERN ...]

The suite is torch/testing/_internal/distributed/distributed_test.py as
Debian's python3-torch (1.13) ships it; Debian does not ship upstream's
runner (test/distributed/test_distributed_spawn.py, whose v1.13 refuses
backends other than gloo, nccl and ucc), so this is ours. It does what that
runner does (the suite's _DistTestBase under TestDistBackend, each test in
world_size fresh processes initialised through file://), and for BACKEND=ddpc
it imports ddpc_torch (from PYTHONPATH) in every process and widens the
suite's backend gates to include ddpc wherever the feature is not gloo's
own (see GATES). Three things Debian's setup needs, for any backend:
  - the `expecttest` package is not packaged: tests/py/expecttest.py stands in;
  - torch.distributed._shard does not import under Python 3.11, and the
    suite switches DDP to ReplicatedTensor mode, which imports it: the mode
    is left off (as it is for every user of DDP);
  - the tests run in chunks of child processes, each under a deadline, so a
    hung test is reported as failed (timeout) and the run goes on.
Prints one line per test (ok / FAIL / skip / TIMEOUT), then
"ok=N failed=N skipped=N"; --json FILE writes every outcome. Exit status 1
when a test failed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = "/usr/lib/python3/dist-packages/torch/testing/_internal/distributed/distributed_test.py"

# The collectives and the CPU DDP tests: what `make test` runs (--subset ci).
CI_PATTERNS = [
    r"^test_(all_reduce|broadcast|reduce|all_gather|gather|scatter|reduce_scatter|all_to_all|barrier)",
    r"^test_(send_recv|isend|irecv|batch_isend_irecv|get_backend|new_subgroups|backend_group|backend_full_group)",
    r"^test_DistributedDataParallel_requires_grad$", r"^test_DistributedDataParallelCPU",
    r"^test_ddp_(comm_hook_logging|create_graph|control_flow_same_across_ranks|get_bucket_sizes|join_model_equivalence)$",
    r"^test_accumulate_gradients_no_sync$", r"^test_get_future$",
]
# Tests of gloo's own features, gated to gloo in the suite and left so.
GLOO_ONLY = re.compile(r"monitored_barrier|sparse")


def widen_gates(src):
    """The suite's source with BACKEND=ddpc let through gates that are not
    gloo-specific (each rewrite below names the lines it matches)."""
    lines = src.split("\n")
    out = []
    for i, line in enumerate(lines):
        # the test (or helper) this line decorates or sits in: the next def
        name = next((m.group(1) for l in lines[i:i + 12] if (m := re.search(r"def (\w+)\(", l))), "")
        keep = GLOO_ONLY.search(name) or "sparse" in line
        if not keep:
            # @sandcastle_skip_if(BACKEND != "gloo", ...) and chains of
            # BACKEND != "x" and BACKEND != "gloo": CPU features gloo has
            # (barrier timeouts, batch_isend_irecv, coalesced allreduce,
            # no_sync, get_future, the scatter_object_list test...)
            line = line.replace('BACKEND != "gloo"', 'BACKEND not in ("gloo", "ddpc")')
            # @require_backend({"gloo"}): the all_reduce_coalesced family
            line = line.replace('require_backend({"gloo"})', 'require_backend({"gloo", "ddpc"})')
            # the CPU model of the DDP tests (_test_accumulate_gradients...)
            line = line.replace('if BACKEND == "mpi" or BACKEND == "gloo":',
                                'if BACKEND == "mpi" or BACKEND in ("gloo", "ddpc"):')
        out.append(line)
    return "\n".join(out)


def load_suite(backend):
    """Imports the suite (rewritten for ddpc) and returns its module."""
    sys.path.insert(0, HERE)  # expecttest.py
    import torch.distributed as dist
    from torch.testing._internal import common_distributed
    from torch.nn.parallel import _replicated_tensor_ddp_utils as rt

    rt._set_ddp_with_replicated_tensor = lambda value: None  # imports _shard, broken on 3.11
    if backend == "ddpc":
        import ddpc_torch  # noqa: F401  registers the backend in this process
        feat = common_distributed.DistTestCases.backend_feature
        # as gloo: "gpu" and "cuda" gate tests that also run on CPU where
        # no GPU is found (each GPU test checks for GPUs itself)
        for key in ("plugin", "ddp", "subgroup", "gpu", "cuda"):
            feat[key].add("ddpc")
    if backend == "ddpc":
        src = widen_gates(open(SUITE).read())
        path = os.path.join(os.environ["DIST_SUITE_DIR"], "ddpc_distributed_test.py")
        if not os.path.exists(path):
            with open(path + ".tmp", "w") as f:
                f.write(src)
            os.replace(path + ".tmp", path)
        sys.path.insert(0, os.environ["DIST_SUITE_DIR"])
        import ddpc_distributed_test as suite
    else:
        from torch.testing._internal.distributed import distributed_test as suite
    del dist
    return suite


def environ(backend, world):
    """The suite reads these at import, in the runner and in every child."""
    os.environ["BACKEND"] = backend
    os.environ["WORLD_SIZE"] = str(world)
    os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="dist_suite_"))
    os.environ.setdefault("DIST_SUITE_DIR", os.environ["TEMP_DIR"])
    os.environ.setdefault("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "120")


def child(names):
    """Runs the named tests here, one result line each."""
    import unittest

    cls = TEST_CLASS
    cls.setUpClass()
    for name in names:
        print(f"START {name}", flush=True)
        result = unittest.TestResult()
        start = time.monotonic()
        cls(name).run(result)
        took = time.monotonic() - start
        if result.errors or result.failures:
            why = (result.errors + result.failures)[0][1].strip().split("\n")[-1][:300]
            print(f"RESULT {name} FAIL {took:.1f} {why}", flush=True)
        elif result.skipped:
            print(f"RESULT {name} skip {took:.1f} {result.skipped[0][1][:200]}", flush=True)
        else:
            print(f"RESULT {name} ok {took:.1f}", flush=True)


def selected(cls, patterns, subset):
    names = sorted(n for n in dir(cls) if n.startswith("test_"))
    if subset == "ci":
        names = [n for n in names if any(re.search(p, n) for p in CI_PATTERNS)]
        names = [n for n in names if "cuda" not in n and "gpu" not in n]
    if patterns:
        names = [n for n in names if any(p in n for p in patterns)]
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="ddpc")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("-k", action="append", default=[], help="run tests whose names contain this")
    ap.add_argument("--subset", choices=["all", "ci"], default="all")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--chunk", type=int, default=25, help="tests per child process")
    ap.add_argument("--test-timeout", type=float, default=150, help="seconds a test may take")
    ap.add_argument("--json", help="write every outcome here")
    ap.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    a, _ = ap.parse_known_args()
    names = selected(TEST_CLASS, a.k, a.subset)
    if a.child is not None:
        child(a.child)
        return 0
    if a.list:
        print("\n".join(names))
        return 0
    results, queue, t0 = {}, list(names), time.monotonic()
    while queue:
        chunk, queue = queue[:a.chunk], queue[a.chunk:]
        cmd = [sys.executable, os.path.abspath(__file__), "--backend", a.backend, "--world-size",
               str(a.world_size), "--child", *chunk]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        current, last = None, time.monotonic()
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        tail = []
        while True:
            if not sel.select(timeout=1.0):
                if current and time.monotonic() - last > a.test_timeout:
                    os.killpg(p.pid, 9)
                    results[current] = ("TIMEOUT", a.test_timeout, f"no result within {a.test_timeout:.0f} s")
                    print(f"TIMEOUT {current}", flush=True)
                    done = set(results)
                    queue = [n for n in chunk if n not in done] + queue
                    break
                continue
            line = p.stdout.readline()
            if not line:
                break
            tail = (tail + [line.rstrip()])[-20:]
            if line.startswith("START "):
                current, last = line.split()[1], time.monotonic()
            elif line.startswith("RESULT "):
                parts = line.rstrip("\n").split(" ", 4)
                results[parts[1]] = (parts[2], float(parts[3]), parts[4] if len(parts) > 4 else "")
                print(f"{parts[2]:7} {parts[1]} ({parts[3]} s) {parts[4] if len(parts) > 4 else ''}".rstrip(),
                      flush=True)
                current = None
        p.wait()
        sel.close()
        missing = [n for n in chunk if n not in results]
        if missing and not any(n in queue for n in missing):  # the child died between tests
            results[missing[0]] = ("FAIL", 0.0, "the test process died: " + " | ".join(tail[-3:]))
            print(f"FAIL    {missing[0]} (process died)", flush=True)
            queue = missing[1:] + queue
    ok = sum(r[0] == "ok" for r in results.values())
    skipped = sum(r[0] == "skip" for r in results.values())
    failed = len(results) - ok - skipped
    print(f"dist_suite {a.backend} world {a.world_size}: ok={ok} failed={failed} skipped={skipped} "
          f"in {time.monotonic() - t0:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"backend": a.backend, "world_size": a.world_size,
                       "results": {n: {"outcome": r[0], "seconds": r[1], "why": r[2]} for n, r in results.items()}},
                      f, indent=1, sort_keys=True)
    return 1 if failed else 0


if __name__ in ("__main__", "__mp_main__"):
    _pre = argparse.ArgumentParser(add_help=False)
    _pre.add_argument("--backend", default="ddpc")
    _pre.add_argument("--world-size", type=int, default=2)
    _b, _ = _pre.parse_known_args()
    environ(_b.backend, _b.world_size)
    _suite = load_suite(_b.backend)

    # At module level, so that the processes each test spawns find it.
    class TestDistBackendWithSpawn(_suite.TestDistBackend, _suite.DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._spawn_processes()

    TEST_CLASS = TestDistBackendWithSpawn
if __name__ == "__main__":
    sys.exit(main())
