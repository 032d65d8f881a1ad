#!/usr/bin/python3
"""Runs PyTorch's own distributed test suite against a torch.distributed backend.

    /usr/bin/python3 tests/py/dist_suite.py --backend gloo|ddpc --world-size N
        [--subset all|ci] [-k PATTERN ...] [--list] [--chunk N]
        [--chunk-timeout S] [--test-timeout S] [--json OUT] [--log-dir DIR]
    VENV/bin/python tests/py/dist_suite.py ...     # the same on pip's torch 2.13
    /usr/bin/python3 tests/py/dist_suite.py --table A.json B.json ...

The suite is torch/testing/_internal/distributed/distributed_test.py as the
torch of the Python that runs this file ships it: Debian 12's python3-torch
(1.13.1, Python 3.11; a Python without torch re-executes this file under
/usr/bin/python3), or pip's torch 2.13.0 wheel (a venv with torch==2.13.0,
numpy and ddpc_torch installed). PROFILES below holds what differs between
the two. Upstream runs it through test/distributed/test_distributed_spawn.py,
which neither ships and whose v1.13 refuses backends other than gloo, nccl
and ucc; this is our equivalent of it: the class
TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase),
every test in WORLD_SIZE fresh processes (multiprocessing "spawn") that meet
through a file:// store.

What the suite needs, for any backend:
  - `expecttest` is in neither Debian's packages nor pip's torch wheel's
    requirements: tests/py/expecttest.py (this directory, first on sys.path)
    stands in for it;
  - common_utils parses sys.argv when imported: it is imported with our own
    arguments hidden;
  - Debian's torch 1.13 only: torch.distributed._shard does not import under
    Python 3.11, and every rank process (TestDistBackend._run) switches DDP
    into ReplicatedTensor mode
    (torch.nn.parallel._replicated_tensor_ddp_utils._DDP_WITH_REPLICATED_TENSOR),
    which imports it: the switch is made a no-op, so the mode stays off, as
    it is for every user of DDP (see no_replicated_tensor()). torch 2.x has
    neither the mode nor the broken import.

For --backend ddpc every process (the runner, each chunk, each rank) imports
ddpc_torch, which registers the backend (dist.Backend.register_backend), from
PYTHONPATH or else from this checkout's build/python (on torch 2.x torch
itself autoloads it, from the venv); and the suite's backend gates are
widened to let ddpc through wherever the feature is not gloo's own
(GATE_SETS, GATE_LISTS and GATE_TEXT_* below, each with its reason; every
text substitution must match exactly as often as it does in torch 1.13.1,
or 2.13.0, or the runner stops and says which one). Left gloo's (or
CUDA's): monitored_barrier (torch 2.13 itself refuses it on other
backends), sparse allreduce, the CUDA-tensor tests, the gloo-env checks of
DDP logging.

The tests run in chunks, each chunk one child process (its own process group)
with a deadline (--chunk-timeout) and a deadline per test (--test-timeout,
also handed to the suite as DISTRIBUTED_TESTS_DEFAULT_TIMEOUT, plus a margin);
a test that overruns is killed with its chunk, reported as TIMEOUT (a
failure), and the chunk's remaining tests go on in a new chunk. One line per
test (ok / FAIL / skip / TIMEOUT), then the last line
"ok=N failed=N skipped=N"; --json writes every test's outcome, seconds and
reason. Exit status 1 when a test failed (or timed out), 2 on a usage or setup
error. Run one at a time: every test already takes WORLD_SIZE + 1 processes.
"""
import argparse
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ for expecttest.py in the checkout
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SUITE_REL = "testing/_internal/distributed/distributed_test.py"  # in torch's package
PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives only there

# --subset ci: the collectives (plain, async, complex, subgroup, coalesced and
# error-checking forms, once each), point-to-point (tags, any source,
# profiling), batch_isend_irecv, barrier (and its timeouts), the object
# collectives and the CPU DDP tests (with comm hooks, futures, logging):
# about 5 minutes at world size 2 on 2 cores. Names, not patterns, so that
# the subset does not grow behind our back. Tests that only run from world
# size 3 up are left to the full suite, but for two (subgroups).
CI_TESTS_1_13 = [
    # all_reduce
    "test_all_reduce_sum", "test_all_reduce_max", "test_all_reduce_sum_async",
    "test_all_reduce_sum_complex", "test_all_reduce_complex_unsupported_ops",
    "test_all_reduce_group_sum", "test_all_reduce_full_group_min",
    "test_all_reduce_coalesced_sum", "test_all_reduce_coalesced_max_complex_unsupported",
    # broadcast, reduce
    "test_broadcast", "test_reduce_sum", "test_reduce_max", "test_reduce_sum_twice",
    # all_gather, gather, scatter
    "test_all_gather", "test_all_gather_coalesced_simple",
    "test_gather", "test_gather_checks", "test_scatter", "test_scatter_checks",
    # reduce_scatter: torch 1.13's suite tests it on CUDA (NCCL) only
    # all_to_all, all_to_all_single: gated to MPI, widened for ddpc (skipped on gloo)
    "test_all_to_all", "test_all_to_all_single_equal_split",
    "test_all_to_all_single_unequal_split",
    # barrier, its timeouts (widened for ddpc)
    "test_barrier", "test_barrier_group", "test_barrier_timeout_full_group",
    "test_barrier_timeout_global",
    # send/recv, isend/irecv, batch_isend_irecv (CPU; widened for ddpc)
    "test_send_recv", "test_send_recv_with_tag", "test_send_recv_any_source",
    "test_send_recv_autograd_profiler", "test_isend", "test_irecv",
    "test_batch_isend_irecv_gloo", "test_batch_isend_irecv_gloo_tags",
    # object collectives, groups, the backend's name
    "test_all_gather_object_default_pg", "test_gather_object", "test_broadcast_object_list",
    "test_scatter_object_list", "test_get_backend", "test_get_rank_size_group",
    # DDP on CPU
    "test_DistributedDataParallelCPU", "test_DistributedDataParallelCPU_grad_is_view",
    "test_DistributedDataParallel_requires_grad", "test_accumulate_gradients_no_sync",
    "test_accumulate_gradients_no_sync_allreduce_hook", "test_get_future",
    "test_ddp_create_graph", "test_static_graph_api_cpu", "test_ddp_logging_data_cpu",
]

# ---------------------------------------------------------------------------
# The gates, widened for ddpc (and only for ddpc: --backend gloo runs the
# suite's own file, untouched).

# DistTestCases (common_distributed) sets, read by decorators while the suite
# is imported, so they are widened before it is.
GATE_SETS = {
    # require_backends_available() lets a backend in this set through
    "plugin": "a registered plugin backend is available",
    # DDP tests: sandcastle_skip_if(BACKEND not in backend_feature["ddp"])
    "ddp": "DistributedDataParallel on CPU",
    # new_subgroups*/subgroup tests (their CUDA forms still need GPUs)
    "subgroup": "new_subgroups and friends",
    # "gpu" (upstream's TODO: it is really "has sequence numbers") gates CPU
    # tests too: the object collectives (all_gather_object, gather_object,
    # broadcast_object_list), test_backend_group...; their CUDA forms still
    # need GPUs (skip_if_lt_x_gpu / require_backends_available({nccl}))
    "gpu": "object collectives, sequence numbers",
    # DDP comm-hook tests; each needs GPUs as well (skipped without)
    "cuda": "DDP communication hooks",
}

# Module-level lists read while a test runs (widened after the import):
# profiling of collectives and of send/recv, i.e. the Work's profiling title
# "ddpc:<op>" recorded as an async event with the input shapes.
GATE_LISTS = ["PROFILING_SUPPORTED_BACKENDS", "SEND_RECV_PROFILING_SUPPORTED_BACKENDS"]

# Substitutions in the suite's text (a copy under the run's temp dir, which is
# imported instead of the original): (what, regex, replacement, count in
# torch 1.13.1). Each is a comparison with a backend name that the decorators
# evaluate at import time.
GATE_TEXT_1_13 = [
    ("barrier timeouts (test_barrier_timeout_{global,group,full_group}): "
     "a collective that times out under the group's timeout is not gloo's own",
     r'BACKEND != "gloo", "Only gloo backend supports timeouts"',
     'BACKEND not in ("gloo", "ddpc"), "Only gloo backend supports timeouts"', 3),
    ("batch_isend_irecv on CPU tensors (test_batch_isend_irecv_gloo{,_tags})",
     r'BACKEND != "gloo", "GLOO Batch Send Recv CPU"',
     'BACKEND not in ("gloo", "ddpc"), "GLOO Batch Send Recv CPU"', 2),
    ("require_backend({'gloo'}) on the all_reduce_coalesced tests (12) and "
     "test_scatter_object_list; the other 5 (monitored_barrier) stay gloo's",
     r'@require_backend\(\{"gloo"\}\)(?=\n\s+def (?:test_all_reduce_coalesced_\w+|test_scatter_object_list)\()',
     '@require_backend({"gloo", "ddpc"})', 13),
    ("Work.get_future / DDP no_sync tests (test_accumulate_gradients_no_sync*, "
     "test_get_future*): 'only supported on mpi, nccl and gloo'",
     r'BACKEND != "mpi" and BACKEND != "nccl" and BACKEND != "gloo",',
     'BACKEND != "mpi" and BACKEND != "nccl" and BACKEND != "gloo" and BACKEND != "ddpc",', 5),
    ("_test_accumulate_gradients_no_sync builds its CPU model for mpi and gloo only",
     r'if BACKEND == "mpi" or BACKEND == "gloo":',
     'if BACKEND == "mpi" or BACKEND == "gloo" or BACKEND == "ddpc":', 1),
    ("all_to_all and all_to_all_single on CPU tensors, gated to MPI (gloo has "
     "no alltoall list form in 1.13; ddpc has both): tested for ddpc, skipped for gloo",
     r'BACKEND != "mpi", "Only MPI supports (CPU )?all_to_all',
     r'BACKEND not in ("mpi", "ddpc"), "Only MPI supports \1all_to_all', 12),
]

# torch 2.13.0's suite (pip's wheel): the same gates, grown. test_barrier_timeout_arg
# (a call's own timeout) joins the timeouts; require_backend became
# require_backend_is_available, and test_grads_same_across_ranks_with_no_sync
# (DDP no_sync on CPU) joins the tests it keeps to gloo. monitored_barrier stays
# gloo's: torch 2.13 itself refuses it on any other backend (distributed_c10d:
# "monitored_barrier is only implemented for GLOO backend").
GATE_TEXT_2_13 = [
    ("barrier timeouts (test_barrier_timeout_{global,group,full_group}) and a call's own "
     "timeout (test_barrier_timeout_arg): not gloo's own",
     r'BACKEND != "gloo", "Only gloo backend supports timeouts"',
     'BACKEND not in ("gloo", "ddpc"), "Only gloo backend supports timeouts"', 4),
    ("batch_isend_irecv on CPU tensors (test_batch_isend_irecv_gloo{,_tags})",
     r'BACKEND != "gloo", "GLOO Batch Send Recv CPU"',
     'BACKEND not in ("gloo", "ddpc"), "GLOO Batch Send Recv CPU"', 2),
    ("require_backend_is_available({'gloo'}) on the all_reduce_coalesced tests (12), "
     "test_scatter_object_list and test_grads_same_across_ranks_with_no_sync; the other 5 "
     "(monitored_barrier) stay gloo's",
     r'@require_backend_is_available\(\{"gloo"\}\)(?=\n\s+def (?:test_all_reduce_coalesced_\w+|'
     r'test_scatter_object_list|test_grads_same_across_ranks_with_no_sync)\()',
     '@require_backend_is_available({"gloo", "ddpc"})', 14),
    ("Work.get_future / DDP no_sync tests (test_accumulate_gradients_no_sync*, "
     "test_get_future): 'only supported on mpi, nccl and gloo'",
     r'BACKEND != "mpi" and BACKEND != "nccl" and BACKEND != "gloo",',
     'BACKEND != "mpi" and BACKEND != "nccl" and BACKEND != "gloo" and BACKEND != "ddpc",', 5),
    ("_test_accumulate_gradients_no_sync builds its CPU model for mpi and gloo only",
     r'if BACKEND == "mpi" or BACKEND == "gloo":',
     'if BACKEND == "mpi" or BACKEND == "gloo" or BACKEND == "ddpc":', 1),
    ("all_to_all and all_to_all_single on CPU tensors, gated to MPI: tested for ddpc "
     "(gloo: skipped, as upstream)",
     r'BACKEND != "mpi", "Only MPI supports (CPU )?all_to_all',
     r'BACKEND not in ("mpi", "ddpc"), "Only MPI supports \1all_to_all', 12),
]

# --subset ci on torch 2.13: 1.13's list (every name is still there), with
# DDP's no_sync check across ranks, less test_ddp_logging_data_cpu: torch
# 2.13 logs every plugin backend's name as "custom" (DDP's Logger asks
# c10d::ProcessGroup::getBackendName(), which is backendTypeToString of the
# type the Python layer gave the group, BackendType::CUSTOM for every plugin,
# not the Backend's own getBackendName(), "ddpc"), and the test expects
# dist.get_backend(), "ddpc". (test_barrier_timeout_arg, widened above, is
# skipped on Linux by upstream itself: pytorch issue 179691.)
CI_TESTS_2_13 = [n for n in CI_TESTS_1_13 if n != "test_ddp_logging_data_cpu"] + [
    "test_grads_same_across_ranks_with_no_sync"]

# What each torch the runner knows needs: its gate substitutions and CI
# list; whether its ranks need the ReplicatedTensor switch made a no-op
# (1.13 only: torch 2.x has no such mode); whether ddpc_torch may come from
# this checkout's build/python (make torch builds it for Debian's 1.13 only;
# on 2.x it is pip-installed into the venv). Keyed by major.minor; the
# counts in GATE_TEXT_* are those of 1.13.1 and 2.13.0.
PROFILES = {
    "1.13": {"gate_text": GATE_TEXT_1_13, "ci": CI_TESTS_1_13, "no_replicated_tensor": True,
             "build_python": True},
    "2.13": {"gate_text": GATE_TEXT_2_13, "ci": CI_TESTS_2_13, "no_replicated_tensor": False,
             "build_python": False},
}


def profile():
    """The profile of the torch this Python imports (dies on one it lacks)."""
    import torch

    key = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if key not in PROFILES:
        die(f"torch {torch.__version__} ({sys.executable}): the runner knows torch "
            f"{' and '.join(PROFILES)} only; add a profile (PROFILES) for it")
    return PROFILES[key]


def die(msg):
    """A setup error (exit status 2, as argparse's usage errors)."""
    print("dist_suite: " + msg, file=sys.stderr, flush=True)
    sys.exit(2)


def widen_text(src, gate_text):
    for what, pattern, repl, count in gate_text:
        src, n = re.subn(pattern, repl, src)
        if n != count:
            die(f"the suite's text changed: the gate substitution for {what!r} matched {n} times, "
                f"expected {count}; update GATE_TEXT for this torch")
    return src


# ---------------------------------------------------------------------------
# Setting up a process (runner, chunk or rank) to import the suite.

def no_replicated_tensor():
    """TestDistBackend._run (every rank) calls _set_ddp_with_replicated_tensor
    (True), whose mode imports torch.distributed._shard, broken on Python
    3.11: make that switch keep the mode off (the module's default)."""
    from torch.nn.parallel import _replicated_tensor_ddp_utils as rt

    def _set_ddp_with_replicated_tensor(value):  # noqa: ARG001
        rt._DDP_WITH_REPLICATED_TENSOR = False

    rt._set_ddp_with_replicated_tensor = _set_ddp_with_replicated_tensor


def import_ddpc_torch():
    """ddpc_torch from PYTHONPATH, else this checkout's build/python (which
    the children then inherit through PYTHONPATH). On torch 2.x, where
    torch autoloads it (the torch.backends entry point) on import, it is
    imported only if that did not register the backend."""
    import torch.distributed as dist

    if "DDPC" in dist.Backend._plugins:
        return
    try:
        import ddpc_torch  # noqa: F401
    except ImportError as e:
        if not profile()["build_python"]:
            die(f"--backend ddpc: ddpc_torch does not import ({e}); install it into this venv "
                f"(pip install --no-build-isolation ./bridges/torch, or make torch2)")
        build = os.path.join(REPO, "build", "python")
        if not os.path.exists(os.path.join(build, "ddpc_torch")):
            die(f"--backend ddpc: ddpc_torch does not import ({e}); build it (make torch) and put "
                f"build/python on PYTHONPATH")
        sys.path.insert(0, build)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (build, os.environ.get("PYTHONPATH")) if p)
        import ddpc_torch  # noqa: F401
    import torch.distributed as dist

    assert "DDPC" in dist.Backend._plugins, "ddpc_torch did not register the backend 'ddpc'"


def load_suite(backend):
    """Imports the suite for backend (widened for ddpc) and returns it."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)  # expecttest.py
    argv, sys.argv = sys.argv, sys.argv[:1]  # common_utils parses sys.argv at import
    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False  # as upstream's runner
        from torch.testing._internal import common_distributed

        prof = profile()
        if prof["no_replicated_tensor"]:
            no_replicated_tensor()
        if backend != "ddpc":
            from torch.testing._internal.distributed import distributed_test as suite
            return suite
        import_ddpc_torch()
        for key in GATE_SETS:
            common_distributed.DistTestCases.backend_feature[key].add("ddpc")
        path = os.path.join(os.environ["DIST_SUITE_DIR"], "ddpc_distributed_test.py")
        if not os.path.exists(path):
            suite_file = os.path.join(os.path.dirname(torch.__file__), SUITE_REL)
            with open(suite_file) as f:
                src = widen_text(f.read(), prof["gate_text"])
            with open(path + f".{os.getpid()}", "w") as f:
                f.write(f"# {suite_file}, its gates widened for ddpc by {os.path.abspath(__file__)}\n" + src)
            os.replace(path + f".{os.getpid()}", path)
        sys.path.insert(0, os.environ["DIST_SUITE_DIR"])
        import ddpc_distributed_test as suite
        for name in GATE_LISTS:
            getattr(suite, name).append("ddpc")
        return suite
    finally:
        sys.argv = argv


def make_test_class(suite):
    class TestDistBackendWithSpawn(suite.TestDistBackend, suite.DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._spawn_processes()
            import torch

            torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

    # pickled by reference (the ranks' target is TestDistBackendWithSpawn._run):
    # a module-level name in __main__, which the ranks re-create (see below)
    TestDistBackendWithSpawn.__qualname__ = "TestDistBackendWithSpawn"
    return TestDistBackendWithSpawn


# ---------------------------------------------------------------------------
# A chunk: runs the named tests here, in this process, one after the other.

def why_of(text):
    """The line of a traceback that says what went wrong."""
    lines = [l.strip() for l in text.strip().split("\n") if l.strip()]
    for l in reversed(lines):
        if re.match(r"^[\w.]*(Error|Exception|Exit|Interrupt|Timeout)\b", l) or "timed out" in l:
            return l[:300]
    return lines[-1][:300] if lines else ""


def run_chunk(cls, names):
    import unittest

    cls.setUpClass()
    for name in names:
        print(f"@@START {name}", flush=True)
        result = unittest.TestResult()
        start = time.monotonic()
        cls(name).run(result)
        rec = {"name": name, "seconds": round(time.monotonic() - start, 1)}
        bad = result.errors + result.failures
        if bad:
            detail = bad[0][1]
            # the suite's own limit (MultiProcessTestCase._join_processes): a timeout
            rec["outcome"] = "timeout" if re.search(r"Process \d+ terminated or timed out after|"
                                                    r"Process \d+ timed out after", detail) else "fail"
            rec["why"] = why_of(detail)
            rec["detail"] = detail[-4000:]
        elif result.skipped:
            rec["outcome"], rec["why"] = "skip", result.skipped[0][1][:300]
        else:
            rec["outcome"], rec["why"] = "ok", ""
        print("@@RESULT " + json.dumps(rec), flush=True)


# ---------------------------------------------------------------------------
# The runner: chunks under deadlines.

def select(names, patterns, subset):
    if subset == "ci":
        ci = profile()["ci"]
        missing = [n for n in ci if n not in names]
        if missing:
            die(f"--subset ci names tests the suite lacks: {missing}")
        names = [n for n in names if n in ci]
    if patterns:
        names = [n for n in names if any(re.search(p, n) for p in patterns)]
    return names


def known_skips(cls, names):
    """{name: why} for the tests that a rank would skip first thing for want
    of GPUs, on a machine without any (CUDA, HPU or XPU): those whose chain of
    decorators holds skip_if_no_gpu or skip_if_lt_x_gpu (without
    allow_cpu=True). They are reported skipped with the suite's own reason,
    without spawning ranks for them (20 s a test on a loaded machine)."""
    import inspect

    import torch
    from torch.testing._internal import common_distributed as cd

    if torch.cuda.is_available() or getattr(cd, "TEST_HPU", False) or getattr(cd, "TEST_XPU", False):
        return {}
    world = int(os.environ["WORLD_SIZE"])
    out = {}
    for name in names:
        f = getattr(cls, name)
        if getattr(f, "__unittest_skip__", False):
            continue  # skipped where it is defined, with its own reason, at no cost
        for _ in range(20):  # a chain of decorators, bounded
            code = getattr(f, "__code__", None)
            q = code.co_qualname if code is not None else ""
            if q == "skip_if_no_gpu.<locals>.wrapper":
                out[name] = cd.TEST_SKIPS["no_cuda"].message
            elif q == "skip_if_lt_x_gpu.<locals>.decorator.<locals>.wrapper":
                free = inspect.getclosurevars(f).nonlocals
                if not free.get("allow_cpu", False) and f"multi-gpu-{free['x']}" in cd.TEST_SKIPS:
                    out[name] = cd.TEST_SKIPS[f"multi-gpu-{free['x']}"].message
            if name in out or not hasattr(f, "__wrapped__"):
                break
            f = f.__wrapped__
        if name in out:
            out[name] += f" (known without spawning: no GPU; world size {world})"
    return out


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_chunks(a, names, tmp, log_dir, limits, child_cmd=None, label="chunk"):
    """Runs names in chunks; returns {name: record}. limits: the suite's
    own time limit of each test (seconds). child_cmd(chunk): the command
    of a chunk's process (default: this file with --child), which prints
    @@START/@@RESULT lines as run_chunk does; label names its logs."""
    results, queue, n_chunk = {}, list(names), 0
    margin = 60  # the suite's own timeout, then its traceback collection and teardown
    while queue:
        chunk, queue = queue[:a.chunk], queue[a.chunk:]
        n_chunk += 1
        log_path = os.path.join(log_dir, f"{label}{n_chunk:03d}.log")
        log = open(log_path, "w")
        cmd = child_cmd(chunk) if child_cmd else [sys.executable, os.path.abspath(__file__), "--child", *chunk]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, cwd=tmp)
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        started = time.monotonic()
        current, current_start, tail, killed, any_started = None, started, [], None, False
        try:
            while True:
                now = time.monotonic()
                if current and now - current_start > limits[current] + margin:
                    killed = f"no result within {limits[current] + margin:.0f} s (--test-timeout)"
                elif now - started > a.chunk_timeout:
                    killed = f"its chunk ran past {a.chunk_timeout:.0f} s (--chunk-timeout)"
                if killed:
                    kill_group(p)
                    break
                if not sel.select(timeout=1.0):
                    continue
                line = p.stdout.readline()
                if not line:
                    break
                log.write(line)
                if line.startswith("@@START "):
                    current, current_start, tail, any_started = line.split()[1], time.monotonic(), [], True
                elif line.startswith("@@RESULT "):
                    rec = json.loads(line[len("@@RESULT "):])
                    results[rec["name"]] = rec
                    report(rec)
                    current = None
                else:
                    tail = (tail + [line.rstrip()])[-40:]
        finally:
            kill_group(p)  # also whatever the chunk's tests left running
            p.wait()
            sel.close()
            log.close()
        if current is not None:  # killed, or the chunk died, in the middle of a test
            took = round(time.monotonic() - current_start, 1)
            if killed:
                rec = {"name": current, "outcome": "timeout", "seconds": took, "why": killed}
            else:
                rec = {"name": current, "outcome": "fail", "seconds": took,
                       "why": f"the chunk process died (exit {p.returncode}): " + why_of("\n".join(tail))}
            rec["detail"] = "\n".join(tail)[-4000:]
            results[current] = rec
            report(rec)
        rest = [n for n in chunk if n not in results]
        if rest and not any_started and not killed:  # died before its first test: a setup error
            die(f"a chunk died before running a test (exit {p.returncode}); see {log_path}:\n"
                + "\n".join(tail[-15:]))
        if rest and killed and current is None:  # chunk deadline between tests
            rec = {"name": rest[0], "outcome": "timeout", "seconds": 0.0, "why": killed}
            results[rest[0]] = rec
            report(rec)
            rest = rest[1:]
        queue = rest + queue
    return results


# the skips of gloo's own features (monitored_barrier, sparse allreduce),
# which stay gloo's: not counted as lost in --table
GLOO_OWN = re.compile(r"Test requires backend (\w+ )?to be one of \{'gloo'\}|Only Gloo backend supports? sparse")

LABEL = {"ok": "ok", "fail": "FAIL", "skip": "skip", "timeout": "TIMEOUT"}


def report(rec):
    why = f" {rec['why']}" if rec.get("why") else ""
    print(f"{LABEL[rec['outcome']]:7} {rec['name']} ({rec['seconds']:.1f} s){why}", flush=True)


def counts(results):
    ok = sum(r["outcome"] == "ok" for r in results.values())
    skipped = sum(r["outcome"] == "skip" for r in results.values())
    return ok, len(results) - ok - skipped, skipped


def table(paths):
    """Markdown: ok/failed/skipped per torch, backend and world size, then
    the tests that pass on gloo but not on the other backend, per torch and
    world size."""
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    print("| torch | backend | world size | ok | failed | skipped | seconds |")
    print("|---|---|---|---|---|---|---|")
    for r in runs:
        ok, failed, skipped = counts(r["results"])
        print(f"| {r.get('torch', '?')} | {r['backend']} | {r['world_size']} | {ok} | {failed} | {skipped} "
              f"| {r.get('seconds', 0):.0f} |")
    by = {(r.get("torch", "?"), r["backend"], r["world_size"]): r["results"] for r in runs}
    for (torch, backend, world), res in sorted(by.items()):
        gloo = by.get((torch, "gloo", world))
        if backend == "gloo" or gloo is None:
            continue
        lost = sorted(n for n, g in gloo.items() if g["outcome"] == "ok" and res.get(n, {}).get("outcome") != "ok")
        own = [n for n in lost if res.get(n, {}).get("outcome") == "skip" and GLOO_OWN.search(res[n].get("why", ""))]
        lost = [n for n in lost if n not in own]
        print(f"\nPass on gloo but not on {backend}, torch {torch}, world size {world}: {len(lost)}")
        for n in lost:
            r = res.get(n, {"outcome": "not run", "why": ""})
            print(f"- {n}: {r['outcome']} {r.get('why', '')}".rstrip())
        if own:
            print(f"\n(and {len(own)} of gloo's own features, skipped for {backend} by design: {', '.join(own)})")
        extra = sorted(n for n, r in res.items() if r["outcome"] == "ok" and gloo.get(n, {}).get("outcome") != "ok")
        if extra:
            print(f"\nPass on {backend} but not on gloo, torch {torch}, world size {world}: {len(extra)}: "
                  + ", ".join(extra))


def add_run_args(ap, chunk, chunk_timeout, test_timeout):
    """The options this runner shares with upstream_suite.py: selection,
    chunks and deadlines, output."""
    ap.add_argument("-k", action="append", default=[], metavar="PATTERN",
                    help="only the tests whose names match (re.search) one of these")
    ap.add_argument("--subset", choices=["all", "ci"], default="all")
    ap.add_argument("--list", action="store_true", help="list the selected tests and stop")
    ap.add_argument("--chunk", type=int, default=chunk, help=f"tests per chunk process ({chunk})")
    ap.add_argument("--chunk-timeout", type=float, default=chunk_timeout,
                    help=f"seconds a chunk may take ({chunk_timeout})")
    ap.add_argument("--test-timeout", type=float, default=test_timeout,
                    help=f"seconds a test may take ({test_timeout}; the suite's own limit, which kills its "
                         "ranks; ours kills the chunk 60 s later)")
    ap.add_argument("--json", metavar="OUT", help="write every test's outcome here")
    ap.add_argument("--log-dir", help="keep each chunk's output here (default: a temp dir, kept when a test failed)")
    ap.add_argument("--table", nargs="+", metavar="JSON", help="print the markdown table of these --json files")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["gloo", "ddpc"], default=os.environ.get("BACKEND", "gloo"))
    ap.add_argument("--world-size", type=int, default=2)
    add_run_args(ap, chunk=20, chunk_timeout=1200, test_timeout=120)
    a = ap.parse_args()
    if a.table:
        table(a.table)
        return 0
    if a.world_size < 2:
        ap.error("--world-size must be at least 2")
    tmp = tempfile.mkdtemp(prefix=f"dist_suite_{a.backend}_w{a.world_size}_")
    log_dir = a.log_dir or os.path.join(tmp, "logs")
    os.makedirs(log_dir, exist_ok=True)
    os.makedirs(os.path.join(tmp, "tmp"))
    # What the suite reads (at import, in every process: the children inherit
    # these). INIT_METHOD only has to be file:// (the suite's file:// tests
    # check it at import; each test's setUp points it at its own file).
    os.environ.update({
        "BACKEND": a.backend, "WORLD_SIZE": str(a.world_size), "TEMP_DIR": tmp, "DIST_SUITE_DIR": tmp,
        "INIT_METHOD": "file://" + os.path.join(tmp, "shared_init_file"),
        "DISTRIBUTED_TESTS_DEFAULT_TIMEOUT": str(int(a.test_timeout)),
        "TMPDIR": os.path.join(tmp, "tmp"),  # the suite's per-test store files, removed with tmp
    })
    keep = False  # tmp (and the logs, when they are in it) once the run is over
    try:
        suite = load_suite(a.backend)
        names = sorted(n for n in dir(suite.DistributedTest._DistTestBase) if n.startswith("test_"))
        names = select(names, a.k, a.subset)
        if a.list:
            print("\n".join(names))
            return 0
        print(f"dist_suite: {len(names)} tests, backend {a.backend}, world size {a.world_size}, "
              f"chunks of {a.chunk}; logs in {log_dir}", flush=True)
        t0 = time.monotonic()
        from torch.testing._internal.common_distributed import get_timeout

        # the suite's limit: --test-timeout, or its own longer one for a few
        # tests (TIMEOUT_OVERRIDE: test_ddp_uneven_inputs, 400 s)
        results = {}
        for name, why in known_skips(suite.DistributedTest._DistTestBase, names).items():
            results[name] = {"name": name, "outcome": "skip", "seconds": 0.0, "why": why}
            report(results[name])
        rest = [n for n in names if n not in results]
        results.update(run_chunks(a, rest, tmp, log_dir, {n: get_timeout(n) for n in rest}))
        took = time.monotonic() - t0
        ok, failed, skipped = counts(results)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"backend": a.backend, "world_size": a.world_size, "seconds": round(took),
                           "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "subset": a.subset, "patterns": a.k,
                           "torch": __import__("torch").__version__, "results": results},
                          f, indent=1, sort_keys=True)
        if failed:
            print("failed: " + " ".join(sorted(n for n, r in results.items() if r["outcome"] in ("fail", "timeout"))))
            if not a.log_dir:  # keep the logs in tmp, not the rest
                keep = True
                shutil.rmtree(os.path.join(tmp, "tmp"), ignore_errors=True)
                for f in os.listdir(tmp):
                    if f.startswith("ddpc_distributed_test"):
                        os.remove(os.path.join(tmp, f))
            print(f"logs kept in {log_dir}")
        print(f"dist_suite {a.backend} world size {a.world_size}: {took:.0f} s")
        print(f"ok={ok} failed={failed} skipped={skipped}", flush=True)
        return 1 if failed else 0
    except SystemExit as e:
        if e.code == 2 and not a.log_dir:  # a setup error: keep the logs it names
            keep = True
        raise
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def reexec_under_debian_python():
    """torch is only in /usr/bin/python3's dist-packages."""
    try:
        import torch  # noqa: F401
    except ImportError:
        if os.path.realpath(sys.executable) != os.path.realpath(PYTHON) and os.path.exists(PYTHON):
            os.execv(PYTHON, [PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
        raise


if __name__ == "__main__" and "--child" in sys.argv:
    # A chunk: the runner handed the environment down.
    _suite = load_suite(os.environ["BACKEND"])
    TestDistBackendWithSpawn = make_test_class(_suite)
    run_chunk(TestDistBackendWithSpawn, sys.argv[sys.argv.index("--child") + 1:])
elif __name__ == "__mp_main__":
    # A rank, spawned by the chunk: the test class must be found here, under
    # the same name (multiprocessing pickles TestDistBackendWithSpawn._run by
    # reference to __main__, which is this module again).
    _suite = load_suite(os.environ["BACKEND"])
    TestDistBackendWithSpawn = make_test_class(_suite)
elif __name__ == "__main__":
    reexec_under_debian_python()
    sys.exit(main())
