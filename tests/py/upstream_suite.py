#!/usr/bin/env python3
"""Runs upstream PyTorch's CPU-capable DTensor / composable / checkpoint tests against a backend.

    VENV/bin/python tests/py/upstream_suite.py --backend gloo|ddpc
        [--subset all|ci] [-k PATTERN ...] [--list] [--chunk N]
        [--chunk-timeout S] [--test-timeout S] [--json OUT] [--log-dir DIR]
    VENV/bin/python tests/py/upstream_suite.py --table GLOO.json DDPC.json

The tests are PyTorch's own files from test/distributed/ (FILES below: each
with the path and commit it came from), kept in tests/py/upstream/ but not
committed (see tests/py/upstream/README.md: they are copied in by hand). A
file of FILES that is not there is reported and left out; --subset ci with
none of its files there prints "upstream_suite: skipped" and exits 0.
They need pip's torch 2.13.0 (the venv `make torch2` fills): their helpers
(torch/testing/_internal/distributed/_tensor/common_dtensor.py,
common_distributed.py, ...) are the wheel's.

Upstream's test bases pick "gloo" on a machine without an accelerator
(DTensorTestBase and DTensorContinuousTestBase through
dist.get_default_backend_for_device("cpu"), MultiProcessTestCase's
subclasses by name, FSDPTest through DISTRIBUTED_BACKEND, tests that call
dist.init_process_group("gloo", ...) themselves). For --backend ddpc every
process (the runner, each chunk and every rank it spawns, which re-imports
this file as __mp_main__ before it unpickles its test) gets
dist.init_process_group and dist.new_group wrapped: a backend argument
"gloo" becomes "ddpc", "cpu:gloo,..." becomes "cpu:ddpc,...", and
init_process_group's backend=None (torch's default, gloo on CPU) becomes
"ddpc" (see point_at). Nothing else is patched, and nothing in the copied
files: the bases' own checks see "gloo" as they would (DTensorTestBase
refuses backend names it does not know before it calls
init_process_group). --backend gloo patches nothing.

Each file runs in chunks (--chunk tests a chunk, one child process each,
its own process group) under the runner's deadlines, through
dist_suite.run_chunks: a test that overruns --test-timeout (plus 60 s) is
killed with its chunk and reported TIMEOUT. The tests keep the world size
their bases fix (4 for the DTensor bases). Tests whose decorators need a GPU
are reported skipped without spawning ranks (dist_suite.known_skips). One
line per test, then "ok=N failed=N skipped=N"; exit status 1 when a test
failed. Run one at a time: a test takes 5 processes.
"""
import argparse
import functools
import json
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
UPSTREAM = os.path.join(HERE, "upstream")
sys.path.insert(0, HERE)

import dist_suite  # noqa: E402  (report, counts, run_chunks, known_skips, die)

# The files: name in tests/py/upstream -> (path in pytorch/pytorch, commit).
# The index held no copy at the v2.13.0 tag (cf30153c, torch.version.git_version
# of the 2.13.0 wheel); these are the copies it held, each checked to import
# against the 2.13.0 wheel's helpers.
FILES = {
    "test_api.py": ("test/distributed/tensor/test_api.py", "06476167521df013fbebc67a2f9c49034a334480"),
    "test_init.py": ("test/distributed/tensor/test_init.py", "06476167521df013fbebc67a2f9c49034a334480"),
    "test_embedding_ops.py": ("test/distributed/tensor/test_embedding_ops.py",
                              "06476167521df013fbebc67a2f9c49034a334480"),
    "test_experimental_ops.py": ("test/distributed/tensor/test_experimental_ops.py",
                                 "06476167521df013fbebc67a2f9c49034a334480"),
    "test_replicate.py": ("test/distributed/_composable/test_replicate.py", "a0a7d4cbec3368a675df716583f0c90c9cb1093a"),
    "test_file_system_checkpoint_cpu.py": ("test/distributed/checkpoint/test_file_system_checkpoint_cpu.py",
                                           "02dee1ad31d013c458c5071f1710da10a2d50392"),
}

# --subset ci (make test, ddpc only): DTensor's constructors and API on a 1-D
# and a 2-D mesh of 4 ranks, two continuous classes (ranks spawned once per
# class): about a minute on 2 loaded cores. Names, so that it does not grow.
CI_TESTS = [
    "test_api.py::DTensorAPITest.test_distribute_tensor_rank",
    "test_api.py::DTensorAPITest.test_distribute_tensor_errors",
    "test_api.py::DTensorAPITest.test_distribute_tensor_uneven_sharding",
    "test_api.py::DTensorAPITest.test_distribute_module",
    "test_init.py::DTensorConstructorTest.test_zeros_full_mesh",
    "test_init.py::DTensorConstructorTest.test_zeros_submesh",
    "test_init.py::DTensorConstructorTest.test_full",
]


# ---------------------------------------------------------------------------
# Setting up a process (runner, chunk or rank) to import the tests.

def point_at(backend):
    """Wraps init_process_group and new_group so that gloo, named or
    default, is `backend`."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    def swap(b, default):
        if b is None:
            return default
        if isinstance(b, str):
            return re.sub(r"\bgloo\b", backend, b)
        return b

    init, new = c10d.init_process_group, c10d.new_group

    @functools.wraps(init)
    def init_process_group(backend=None, *args, **kw):
        to = swap(backend, point_at.backend)
        pg = init(to, *args, **kw)
        # one line a rank in the chunk's log: what it asked for, what it got
        print(f"upstream_suite: pid {os.getpid()} init_process_group({backend!r}) -> {to!r}: "
              f"{dist.get_backend()}", file=sys.stderr, flush=True)
        return pg

    @functools.wraps(new)
    def new_group(*args, **kw):
        if len(args) > 2:
            args = args[:2] + (swap(args[2], None),) + args[3:]
        if "backend" in kw:
            kw["backend"] = swap(kw["backend"], None)
        return new(*args, **kw)

    point_at.backend = backend
    for mod in (dist, c10d):
        mod.init_process_group, mod.new_group = init_process_group, new_group


def setup_process(backend):
    """sys.path for the tests and expecttest.py; common_utils imported with
    our arguments hidden (it parses sys.argv at import); for ddpc, the
    backend registered and gloo swapped for it."""
    if UPSTREAM not in sys.path:
        sys.path.insert(0, UPSTREAM)
    argv, sys.argv = sys.argv, sys.argv[:1]
    try:
        import torch.testing._internal.common_utils  # noqa: F401
        import torch.testing._internal.distributed._tensor.common_dtensor  # noqa: F401
    finally:
        sys.argv = argv
    if backend == "ddpc":
        dist_suite.import_ddpc_torch()
        point_at("ddpc")


def import_file(name):
    argv, sys.argv = sys.argv, sys.argv[:1]
    try:
        return __import__(name[:-len(".py")])
    finally:
        sys.argv = argv


def tests_of(fname):
    """{test id "file::Class.method": the unittest test} of one file."""
    mod = import_file(fname)
    out = {}

    def walk(suite):
        for t in suite:
            if isinstance(t, unittest.TestSuite):
                walk(t)
            else:
                out[f"{fname}::{type(t).__name__}.{t._testMethodName}"] = t

    walk(unittest.TestLoader().loadTestsFromModule(mod))
    return out


# ---------------------------------------------------------------------------
# A chunk: runs the named tests of one file here, as unittest does (class
# fixtures once per class: the continuous bases spawn their ranks there).

class ChunkResult(unittest.TestResult):
    """Prints dist_suite's @@START / @@RESULT lines as tests run."""

    def __init__(self, fname):
        super().__init__()
        self.fname, self.rec, self.class_error, self.done = fname, None, None, set()

    def test_id(self, test):
        return f"{self.fname}::{type(test).__name__}.{test._testMethodName}"

    def startTest(self, test):
        super().startTest(test)
        self.rec = {"name": self.test_id(test), "outcome": "ok", "why": "", "t0": time.monotonic()}
        print(f"@@START {self.rec['name']}", flush=True)

    def stopTest(self, test):
        super().stopTest(test)
        rec, self.rec = self.rec, None
        self.done.add(rec["name"])
        rec["seconds"] = round(time.monotonic() - rec.pop("t0"), 1)
        print("@@RESULT " + json.dumps(rec), flush=True)

    def _bad(self, test, err):
        detail = self._exc_info_to_string(err, test)
        if self.rec is None:  # setUpClass / tearDownClass: kept for the class's tests
            self.class_error = detail
            return
        if self.rec["outcome"] != "ok":
            return
        timeout = re.search(r"(Process \d+|Worker \d+) (terminated or )?timed out|Timeout waiting", detail)
        self.rec.update(outcome="timeout" if timeout else "fail", why=dist_suite.why_of(detail),
                        detail=detail[-4000:])

    def addError(self, test, err):
        super().addError(test, err)
        self._bad(test, err)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._bad(test, err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        if self.rec is not None:
            self.rec.update(outcome="skip", why=reason[:300])


def run_chunk(names):
    fname = names[0].split("::")[0]
    tests = tests_of(fname)
    result = ChunkResult(fname)
    suite = unittest.TestSuite([tests[n] for n in names])
    suite.run(result)
    # a class whose setUpClass failed ran none of its tests: they fail with its error
    for n in names:
        if n not in result.done:
            why = dist_suite.why_of(result.class_error or "not run")
            print(f"@@START {n}", flush=True)
            print("@@RESULT " + json.dumps({"name": n, "outcome": "fail", "seconds": 0.0,
                                            "why": "class setup: " + why,
                                            "detail": (result.class_error or "")[-4000:]}), flush=True)


# ---------------------------------------------------------------------------
# The runner.

def select(names, patterns, subset):
    if subset == "ci":
        names = [n for n in names if n in CI_TESTS]
    if patterns:
        names = [n for n in names if any(re.search(p, n) for p in patterns)]
    return names


def table(paths):
    """Markdown: per file, ok/failed/skipped on each backend; then the tests
    that pass on gloo but not on the other."""
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    files = sorted({n.split("::")[0] for r in runs for n in r["results"]})
    print("| file | " + " | ".join(f"{r['backend']} ok / failed / skipped" for r in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for fname in files + ["all"]:
        cells = []
        for r in runs:
            res = {n: v for n, v in r["results"].items() if fname == "all" or n.startswith(fname + "::")}
            cells.append("%d / %d / %d" % dist_suite.counts(res))
        label = f"`{FILES[fname][0]}`" if fname in FILES else fname
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("\n(seconds: " + ", ".join(f"{r['backend']} {r['seconds']}" for r in runs) + ")")
    gloo = next((r["results"] for r in runs if r["backend"] == "gloo"), None)
    for r in runs:
        if r["backend"] == "gloo" or gloo is None:
            continue
        lost = sorted(n for n, g in gloo.items()
                      if g["outcome"] == "ok" and r["results"].get(n, {}).get("outcome") != "ok")
        print(f"\nPass on gloo but not on {r['backend']}: {len(lost)}")
        for n in lost:
            x = r["results"].get(n, {"outcome": "not run", "why": ""})
            print(f"- {n}: {x['outcome']} {x.get('why', '')}".rstrip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["gloo", "ddpc"], default="ddpc")
    dist_suite.add_run_args(ap, chunk=40, chunk_timeout=1800, test_timeout=180)
    a = ap.parse_args()
    if a.table:
        table(a.table)
        return 0
    present = [f for f in FILES if os.path.exists(os.path.join(UPSTREAM, f))]
    for f in FILES:
        if f not in present:
            print(f"upstream_suite: {f} ({FILES[f][0]}) is not in {UPSTREAM}: left out "
                  f"(tests/py/upstream/README.md says how to copy it in)", flush=True)
    if a.subset == "ci" and not any(n.split("::")[0] in present for n in CI_TESTS):
        print("upstream_suite: skipped: none of the CI subset's files is in tests/py/upstream")
        return 0
    tmp = tempfile.mkdtemp(prefix=f"upstream_suite_{a.backend}_")
    log_dir = a.log_dir or os.path.join(tmp, "logs")
    os.makedirs(log_dir, exist_ok=True)
    os.makedirs(os.path.join(tmp, "tmp"))
    os.environ.update({
        "UPSTREAM_SUITE_BACKEND": a.backend, "WORLD_SIZE": "4",
        "DISTRIBUTED_TESTS_DEFAULT_TIMEOUT": str(int(a.test_timeout)),
        "TMPDIR": os.path.join(tmp, "tmp"),  # rendezvous files, checkpoints: removed with tmp
        "TORCH_CPP_LOG_LEVEL": os.environ.get("TORCH_CPP_LOG_LEVEL", "ERROR"),
    })
    keep = False
    try:
        setup_process(a.backend)
        from torch.testing._internal.common_distributed import get_timeout

        results, t0 = {}, time.monotonic()
        plan = []
        ci_files = {n.split("::")[0] for n in CI_TESTS}
        for fname in present:
            if a.subset == "ci" and fname not in ci_files:
                continue  # not imported: a file that does not import fails only the full run
            try:
                tests = tests_of(fname)
            except Exception as e:  # a copy newer or older than this torch: the file fails, the rest go on
                n = f"{fname}::import"
                results[n] = {"name": n, "outcome": "fail", "seconds": 0.0, "why": f"{type(e).__name__}: {e}"[:300]}
                dist_suite.report(results[n])
                continue
            names = select(sorted(tests), a.k, a.subset)
            plan.append((fname, tests, names))
        if a.list:
            print("\n".join(n for _, _, names in plan for n in names))
            return 0
        total = sum(len(names) for _, _, names in plan)
        print(f"upstream_suite: {total} tests in {len(plan)} files, backend {a.backend}; logs in {log_dir}",
              flush=True)
        for fname, tests, names in plan:
            by_class = {}
            for n in names:
                by_class.setdefault(type(tests[n]), []).append(n)
            skip = {}
            for cls, ns in by_class.items():
                methods = [n.split(".")[-1] for n in ns]
                for m, why in dist_suite.known_skips(cls, methods).items():
                    # (known_skips names dist_suite's one world size; each class here has its own)
                    skip[f"{fname}::{cls.__name__}.{m}"] = re.sub(r"; world size \d+\)$", ")", why)
            for n, why in skip.items():
                results[n] = {"name": n, "outcome": "skip", "seconds": 0.0, "why": why}
                dist_suite.report(results[n])
            rest = [n for n in names if n not in skip]
            limits = {n: get_timeout(n) for n in rest}
            child = lambda chunk: [sys.executable, os.path.abspath(__file__), "--child", *chunk]  # noqa: E731
            results.update(dist_suite.run_chunks(a, rest, tmp, log_dir, limits, child_cmd=child,
                                                 label=fname[:-len(".py")] + "-"))
        took = time.monotonic() - t0
        ok, failed, skipped = dist_suite.counts(results)
        if a.json:
            import torch

            with open(a.json, "w") as f:
                json.dump({"backend": a.backend, "seconds": round(took), "subset": a.subset, "patterns": a.k,
                           "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "torch": torch.__version__,
                           "load": os.getloadavg(), "files": {f: FILES[f] for f in present},
                           "results": results}, f, indent=1, sort_keys=True)
        if failed:
            print("failed: " + " ".join(sorted(n for n, r in results.items() if r["outcome"] in ("fail", "timeout"))))
            if not a.log_dir:
                keep = True
                shutil.rmtree(os.path.join(tmp, "tmp"), ignore_errors=True)
            print(f"logs kept in {log_dir}")
        print(f"upstream_suite {a.backend}: {took:.0f} s")
        print(f"ok={ok} failed={failed} skipped={skipped}", flush=True)
        return 1 if failed else 0
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__" and "--child" in sys.argv:
    # A chunk: the runner handed the environment down.
    setup_process(os.environ["UPSTREAM_SUITE_BACKEND"])
    run_chunk(sys.argv[sys.argv.index("--child") + 1:])
elif __name__ == "__mp_main__":
    # A rank, spawned by a chunk (or a continuous class's worker): patched
    # as its chunk is before it unpickles its test from the test's module.
    setup_process(os.environ["UPSTREAM_SUITE_BACKEND"])
elif __name__ == "__main__":
    sys.exit(main())
