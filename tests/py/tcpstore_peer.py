#!/usr/bin/python3
"""tcpstore_peer.py -- PyTorch's own c10d TCPStore (torch 1.13, or torch 2.x
with its own queries) as the other side of ddpc's store, for
tests/dist/test_torch_store.c.

    PYTHON tests/py/tcpstore_peer.py client HOST PORT
    PYTHON tests/py/tcpstore_peer.py server

PYTHON is /usr/bin/python3 (Debian's torch 1.13) or a torch 2.x Python
(DDPC_TEST_TORCH2_PY). Under torch 2.x the client also runs what 2.x added
(check, append, multi_get/multi_set, queues, list_keys, barrier; see
run_client_v2) and removes the keys it made for that, so the C side finds
the same keys after either.

client: torch.distributed.TCPStore(HOST, PORT, is_master=False) against a
  ddpc store server. Runs every operation the Python object has (set, get,
  add, compare_set, wait with and without a timeout, delete_key, num_keys,
  set_timeout; torch 1.13's Python TCPStore has no check()), reads the keys
  the C side set before starting it, and leaves keys for the C side to read
  afterwards. The C side sets, before this starts:
      c_to_py = b"from C", c_bin = b"\\0C\\0\\xff", c_ctr = b"41"
  and, while this runs, a C process waits for py_waiting and then sets
  wake_a and wake_b. This leaves: py_to_c = b"from python",
  py_bin = b"\\0\\1py\\0", py_big = big_value(), py_ctr = b"-2",
  c_ctr = b"42", cas_* as commented below, py_done = b"1".
server: hosts TCPStore('127.0.0.1', 0, is_master=True), sets py_a, py_b,
  py_ctr and py_big, prints "PORT <n>", then waits (at most 60 s) until the
  C side sets "done" and checks what it set (see check_c_side).

Key names: torch 1.13's TCPStore sends every key with "/" in front (a
Python key K is "/K" on the wire; only the constructor's "init/" counter has
none); a ddpc client sends its keys as they are, so the C side names
Python's key K as "/K" (a ddpc_store_prefixed view with prefix "/").

Prints one line per check ("ok   ..." or "FAIL ..."), ends with a summary
line, exits 0 when every check passed, 1 otherwise, 2 on a usage error. The
whole run is bounded by SIGALRM (no handler installed, so the alarm ends the
process even inside a blocking TCPStore call, which holds the GIL).
"""
import datetime
import os
import signal
import sys
import time

# DDPC_TEST_SLOW (the harness's factor for slow runs, e.g. under valgrind)
# stretches every limit below; the timeouts this checks stay as they are.
SLOW = max(1.0, float(os.environ.get("DDPC_TEST_SLOW") or 1))
RUN_LIMIT_S = int(120 * SLOW)  # the whole process, whatever it is doing
BIG_LEN = (1 << 20) + 3


def big_value():
    """1 MiB + 3 bytes, every byte value present (the C side builds the same)."""
    return bytes((i * 131 + (i >> 13)) & 0xFF for i in range(BIG_LEN))


def secs(s):
    return datetime.timedelta(seconds=s)


class Checks:
    def __init__(self, who):
        self.who, self.passed, self.failed = who, 0, 0

    def ok(self, cond, what, detail=""):
        if cond:
            self.passed += 1
            print("ok   %s" % what, flush=True)
        else:
            self.failed += 1
            print("FAIL %s%s" % (what, ": " + detail if detail else ""), flush=True)
        return cond

    def eq(self, got, want, what):
        return self.ok(got == want, what, "got %r, want %r" % (_short(got), _short(want)))

    def raises_timeout(self, fn, limit_s, what):
        """fn() must raise an exception naming a timeout within [0.8, 4] x limit_s."""
        t0 = time.monotonic()
        try:
            r = fn()
        except Exception as e:  # torch raises RuntimeError("Socket Timeout")
            dt = time.monotonic() - t0
            self.ok("timeout" in str(e).lower(), what + ": the exception names a timeout", repr(e))
            self.ok(0.8 * limit_s <= dt <= 4 * limit_s + 1,
                    what + ": raised after %.2f s (limit %.1f s)" % (dt, limit_s), "too early or too late")
            return
        self.ok(False, what, "returned %r instead of timing out" % (_short(r),))

    def end(self):
        n = self.passed + self.failed
        if self.failed:
            print("tcpstore_peer %s: FAILED %d of %d checks" % (self.who, self.failed, n), flush=True)
            return 1
        print("tcpstore_peer %s: all %d checks passed" % (self.who, n), flush=True)
        return 0


def _short(v):
    if isinstance(v, (bytes, bytearray)) and len(v) > 40:
        return "%d bytes %r..." % (len(v), bytes(v[:16]))
    return v


def run_client(host, port):
    import torch
    from torch.distributed import TCPStore

    t = Checks("client")
    print("torch %s; TCPStore has check(): %s" % (torch.__version__, hasattr(TCPStore, "check")), flush=True)

    # 1. world_size makes the constructor add("init/", 1) (no "/" before it).
    s = TCPStore(host, port, world_size=2, is_master=False, timeout=secs(10 * SLOW))
    t.ok(True, "connect (world_size=2: the constructor's add('init/', 1))")

    # 2. the keys the C side set before starting this
    t.eq(s.get("c_to_py"), b"from C", "get c_to_py (set by C)")
    t.eq(s.get("c_bin"), b"\0C\0\xff", "get c_bin (set by C, NUL bytes)")
    t.eq(s.add("c_ctr", 1), 42, "add c_ctr 1 (41 set by C)")

    # 3. set / get: text, overwrite, empty, every byte value, 1 MiB
    s.set("py_str", "first")
    t.eq(s.get("py_str"), b"first", "set/get py_str")
    s.set("py_str", "second")
    t.eq(s.get("py_str"), b"second", "set/get py_str overwritten")
    s.set("py_empty", b"")
    t.eq(s.get("py_empty"), b"", "set/get an empty value")
    allbytes = bytes(range(256))
    s.set("py_bytes", allbytes)
    t.eq(s.get("py_bytes"), allbytes, "set/get all 256 byte values")
    big = big_value()
    s.set("py_big", big)
    t.eq(s.get("py_big"), big, "set/get %d bytes" % BIG_LEN)

    # 4. add: absent counts as 0, negative deltas, zero, stored as decimal text
    t.eq(s.add("py_ctr", 5), 5, "add py_ctr 5 (absent)")
    t.eq(s.add("py_ctr", -7), -2, "add py_ctr -7")
    t.eq(s.add("py_ctr", 0), -2, "add py_ctr 0")
    t.eq(s.get("py_ctr"), b"-2", "get py_ctr is decimal text")
    t.eq(s.add("py_ctr_big", 1 << 40), 1 << 40, "add 2^40")

    # 5. compare_set, torch's semantics
    t.eq(s.compare_set("cas_a", "", "one"), b"one", "compare_set absent, expected '': sets")
    t.eq(s.get("cas_a"), b"one", "  ... cas_a is set")
    n0 = s.num_keys()
    t.eq(s.compare_set("cas_b", "x", "y"), b"x", "compare_set absent, expected 'x': answers 'x'")
    t.eq(s.num_keys(), n0, "  ... and sets nothing (num_keys unchanged)")
    t.eq(s.compare_set("cas_a", "one", "two"), b"two", "compare_set present and equal: swaps")
    t.eq(s.compare_set("cas_a", "zzz", "three"), b"two", "compare_set present, unequal: unchanged")
    t.eq(s.compare_set("cas_a", "", "four"), b"two", "compare_set present, expected '': unchanged")
    t.eq(s.get("cas_a"), b"two", "  ... cas_a is 'two'")

    # 6. num_keys and delete_key
    n0 = s.num_keys()
    t.ok(n0 >= 10, "num_keys %d counts the keys so far" % n0)
    s.set("py_tmp", "x")
    t.eq(s.num_keys(), n0 + 1, "num_keys after setting a new key")
    t.eq(s.delete_key("py_tmp"), True, "delete_key of a key that exists")
    t.eq(s.delete_key("py_tmp"), False, "delete_key of a key that does not")
    t.eq(s.num_keys(), n0, "num_keys after deleting it")

    # 7. wait: keys already there; keys a ddpc client sets while this waits
    s.wait(["py_str", "c_to_py", "cas_a"])
    t.ok(True, "wait on three keys that exist")
    s.wait(["py_str"], secs(5 * SLOW))
    t.ok(True, "wait with a timeout on a key that exists")
    s.set("py_waiting", "1")
    t0 = time.monotonic()
    try:
        s.wait(["wake_a", "wake_b"], secs(20 * SLOW))
        t.ok(True, "wait on wake_a, wake_b, set by a ddpc client meanwhile (%.2f s)" % (time.monotonic() - t0))
    except Exception as e:
        t.ok(False, "wait on wake_a, wake_b, set by a ddpc client meanwhile", repr(e))
    t.eq(s.get("wake_b"), b"b", "get wake_b")

    # 8. a wait that times out
    t.raises_timeout(lambda: s.wait(["never_a", "never_b"], secs(1)), 1, "wait on keys never set, 1 s")
    # torch 1.13's client cannot cancel a wait: it just sends its next request
    # on the same connection, and torch's own server answers it. ddpc's server
    # takes such a request as the client giving up on its wait, and serves it.
    # (torch 2.x's client sends CANCEL_WAIT first, answered WAIT_CANCELED.)
    s.set_timeout(secs(2))
    try:
        v = s.get("py_str")
    except Exception as e:
        v = e
    t.eq(v, b"second", "the same client after its wait timed out: get py_str")
    del s

    if hasattr(TCPStore, "queue_push"):  # torch 2.x
        run_client_v2(t, TCPStore, host, port)

    # 9. a fresh client: the store is still usable; a get that times out
    s = TCPStore(host, port, is_master=False, timeout=secs(10 * SLOW))
    t.eq(s.get("py_str"), b"second", "a fresh client after the timed-out wait: get py_str")
    s.set_timeout(secs(1))
    t.raises_timeout(lambda: s.get("py_missing"), 1, "get of a key never set, store timeout 1 s")
    del s  # same caveat as above

    # 10. the keys the C side checks once this has exited
    s = TCPStore(host, port, is_master=False, timeout=secs(10 * SLOW))
    s.set("py_to_c", "from python")
    s.set("py_bin", b"\0\1py\0")
    s.set("py_done", "1")
    t.eq(s.get("py_done"), b"1", "set the keys for the C side (py_to_c, py_bin, py_done)")
    return t.end()


def run_client_v2(t, TCPStore, host, port):
    """What torch 2.x's TCPStore added, against the same server; leaves no key."""
    import threading

    s = TCPStore(host, port, is_master=False, timeout=secs(10 * SLOW))
    t.eq(s.check(["py_str", "c_to_py"]), True, "v2 check of keys that exist")
    t.eq(s.check(["py_str", "py2_never"]), False, "v2 check of a key that does not")
    t.eq(s.get("py_str"), b"second", "v2 get on a fresh (validated) connection")

    # append: creates, then extends
    s.append("py2_app", b"ab")
    s.append("py2_app", b"\0cd")
    t.eq(s.get("py2_app"), b"ab\0cd", "v2 append creates, then appends")

    # multi_set / multi_get
    s.multi_set(["py2_m1", "py2_m2"], [b"one", b""])
    t.eq(s.multi_get(["py2_m1", "py2_m2", "py_str"]), [b"one", b"", b"second"], "v2 multi_set, multi_get")

    # list_keys: every key so far, queues apart
    keys = s.list_keys()
    t.ok("py2_m1" in keys and "py_str" in keys and "py2_app" in keys,
         "v2 list_keys has py2_m1, py_str, py2_app", repr(sorted(keys)[:40]))
    # list_keys answers only keys under the client's "/" prefix: all but "init/"
    t.eq(len(keys), s.num_keys() - 1, "v2 list_keys has every key but 'init/'")

    # queues: push/len/pop, non-blocking pop of an empty queue, a blocking
    # pop woken by another client's push
    s.queue_push("py2_q", b"first")
    s.queue_push("py2_q", "second")
    t.eq(s.queue_len("py2_q"), 2, "v2 queue_len after two pushes")
    t.eq(s.check(["py2_q"]), True, "v2 check counts a queue with items")
    n0 = s.num_keys()
    t.eq(s.queue_pop("py2_q"), b"first", "v2 queue_pop (first in, first out)")
    t.eq(s.queue_pop("py2_q", False), b"second", "v2 queue_pop without blocking")
    t.eq(s.queue_len("py2_q"), 0, "v2 queue_len after popping both")
    t.eq(s.num_keys(), n0, "v2 queues are not keys")
    try:
        s.queue_pop("py2_q", False)
        t.ok(False, "v2 queue_pop of an empty queue without blocking raises")
    except Exception as e:
        t.ok("empty" in str(e).lower(), "v2 queue_pop of an empty queue without blocking raises", repr(e))

    other = TCPStore(host, port, is_master=False, timeout=secs(10 * SLOW))

    def push_later():
        time.sleep(0.3)
        other.queue_push("py2_q", b"late")

    th = threading.Thread(target=push_later)
    th.start()
    t0 = time.monotonic()
    t.eq(s.queue_pop("py2_q"), b"late", "v2 blocking queue_pop woken by another client's push")
    th.join()
    t.ok(time.monotonic() - t0 >= 0.2, "  ... after the push (%.2f s)" % (time.monotonic() - t0))

    # barrier: two clients, the second arriving later; then one that times out
    done = []

    def barrier_other():
        other.barrier("py2_bar", 2)
        done.append(time.monotonic())

    th = threading.Thread(target=barrier_other)
    th.start()
    time.sleep(0.3)
    t.ok(not done, "v2 barrier: the first arrival waits for the second")
    s.barrier("py2_bar", 2)
    th.join(10 * SLOW)
    t.ok(bool(done), "v2 barrier: both arrivals pass once the second comes")
    t.raises_timeout(lambda: s.barrier("py2_bar_to", 2, secs(1)), 1, "v2 barrier that nobody completes, 1 s")
    t.eq(s.get("py_str"), b"second", "v2 the same client after its barrier timed out (cancel_wait)")
    t.raises_timeout(lambda: s.wait(["py2_never"], secs(0.5)), 0.5, "v2 wait that times out, 0.5 s")
    t.eq(s.get("py_str"), b"second", "v2 the same client after its wait timed out (cancel_wait)")

    # leave the keys as torch 1.13's run would have
    for k in ("py2_app", "py2_m1", "py2_m2", "py2_bar", "py2_bar_to"):
        t.eq(s.delete_key(k), True, "v2 delete_key %s" % k)
    del other
    del s


def check_c_side(t, master):
    """What the C side (test_torch_store.c, test torch_store_ddpc_client_vs_torch_server)
    set through a ddpc client before setting "done"."""
    t.eq(master.get("c_str"), b"hello from C", "get c_str (set by C)")
    t.eq(master.get("c_bin"), b"\0\1\0\xff", "get c_bin (set by C, NUL bytes)")
    t.eq(master.get("c_big"), big_value(), "get c_big (%d bytes, set by C)" % BIG_LEN)
    t.eq(master.get("py_ctr"), b"7", "get py_ctr (10, then add -3 by C)")
    t.eq(master.get("c_ctr"), b"-5", "get c_ctr (add 4, add -9 by C)")
    t.eq(master.get("c_cas"), b"v2", "get c_cas (compare_set by C)")
    t.eq(master.get("late"), b"L", "get late (set by a second ddpc client)")
    t.eq(master.get("pv/k"), b"view value", "get pv/k (set by C through prefixed views '/' + 'pv/')")
    t.eq(master.get("pv/ctr"), b"3", "get pv/ctr (add through the view)")
    t.eq(master.get("after_timeout"), b"yes", "get after_timeout (set by C after its get timed out)")
    t.eq(master.add("c_ctr", 1), -4, "add c_ctr 1 here")
    # keys C deleted: a wait on them must time out (last: it may leave the
    # master's client connection unusable, see run_client step 8)
    t.raises_timeout(lambda: master.wait(["c_deleted"], secs(0.5)), 0.5, "wait on c_deleted (deleted by C)")


def run_server():
    import torch
    from torch.distributed import TCPStore

    t = Checks("server")
    master = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=secs(60 * SLOW))
    master.set("py_a", "alpha")
    master.set("py_b", b"\0b\0")
    master.set("py_ctr", "10")
    master.set("py_big", big_value())
    print("torch %s" % torch.__version__, flush=True)
    print("PORT %d" % master.port, flush=True)
    try:
        master.wait(["done"], secs(60 * SLOW))
    except Exception as e:
        t.ok(False, "the C side set 'done' within %.0f s" % (60 * SLOW), repr(e))
        return t.end()
    t.ok(True, "the C side set 'done'")
    check_c_side(t, master)
    return t.end()


def main(argv):
    signal.alarm(RUN_LIMIT_S)
    if len(argv) == 4 and argv[1] == "client":
        return run_client(argv[2], int(argv[3]))
    if len(argv) == 2 and argv[1] == "server":
        return run_server()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
