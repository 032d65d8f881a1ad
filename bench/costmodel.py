#!/usr/bin/python3
"""costmodel.py -- the alpha-beta-gamma model of ddpc's allreduce, fitted to
bench/costmodel.sh's runs, printed as docs/COSTMODEL.md.

    /usr/bin/python3 bench/costmodel.py build/bench/costmodel > docs/COSTMODEL.md

Reads DIR/info and DIR/<hosts>x<ranks>.<coll>.<algo>.<size>.<round>.txt
(ddpc-bench's tables). Fits, by least squares on relative error (no numpy):
  intra-host (1 x 2, shared memory): allgather = alpha_l + S/2 beta_l,
      reduce-scatter = the same + S/2 gamma;
  the link (2 x 1 and 4 x 1): ring allgather = (n-1) alpha + (n-1)/n S beta,
      reduce-scatter the same + (n-1)/n S gamma (gamma from the intra fit).
Then prints the formulas, the parameters, the model beside the measured
allreduce on 2 x 2 and 4 x 2 (flat and hier), and the projection to 8, 64,
256 and 1,024 hosts of RANKS_PER_HOST ranks (default 8) for DDP's bucket
sizes (1, 25, 100 MiB), with the fitted link and with a what-if link
(WHATIF_GBIT, default 100, and WHATIF_US, default 10).
"""
import math
import os
import statistics
import sys

MiB = 1 << 20
SMALL = 64 << 10  # DDPC_SMALL_BYTES: latency algorithms at or below


def parse_size(s):
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mul[s[-1]] if s[-1] in mul else int(s)


def load(d):
    """{(layout, coll, algo, size_bytes): seconds, the least over rounds of
    ddpc-bench's median over iterations: on a machine shared with other work
    the least disturbed round is the closest to what the links cost}"""
    runs = {}
    for name in os.listdir(d):
        parts = name.split(".")
        if len(parts) != 6 or parts[5] != "txt":
            continue
        lay, coll, algo, size = parts[0], parts[1], parts[2], parse_size(parts[3])
        for line in open(os.path.join(d, name)):
            f = line.split()
            if len(f) == 9 and f[0].isdigit():
                if f[8] != "0":
                    sys.exit(f"costmodel: {name}: {f[8]} wrong values")
                runs.setdefault((lay, coll, algo, size), []).append(float(f[5]) * 1e-6)
    return {k: min(v) for k, v in runs.items()}


def solve_abs(rows):
    """Least squares x for sum over rows (a . x - t)^2."""
    k = len(rows[0][0])
    ata = [[0.0] * k for _ in range(k)]
    atb = [0.0] * k
    for a, t in rows:
        w = 1.0
        for i in range(k):
            atb[i] += w * a[i] * t
            for j in range(k):
                ata[i][j] += w * a[i] * a[j]
    for c in range(k):  # Gauss-Jordan with partial pivoting
        p = max(range(c, k), key=lambda r: abs(ata[r][c]))
        ata[c], ata[p], atb[c], atb[p] = ata[p], ata[c], atb[p], atb[c]
        for r in range(k):
            if r != c and ata[c][c]:
                m = ata[r][c] / ata[c][c]
                ata[r] = [x - m * y for x, y in zip(ata[r], ata[c])]
                atb[r] -= m * atb[c]
    return [atb[i] / ata[i][i] for i in range(k)]


# ---------------------------------------------------------------- the model
# P: alpha, beta (the link), alpha_l, beta_l (inside a host), gamma; seconds
# and seconds per byte. S: bytes of the vector.

def lg(p):
    return math.ceil(math.log2(p)) if p > 1 else 0


def ring(P, p, S, a, b):
    """Ring allreduce over p members on links (a, b)."""
    return 2 * (p - 1) * a + 2 * (p - 1) / p * S * b + (p - 1) / p * S * P["gamma"]


def rhd(P, p, S, a, b):
    """Recursive halving-doubling allreduce (Rabenseifner), HCCL's formula
    with its fold for p not a power of two."""
    q = 1 << int(math.log2(p)) if p > 1 else 1
    if q == p:
        return 2 * lg(p) * a + 2 * (p - 1) / p * S * b + (p - 1) / p * S * P["gamma"]
    return ((2 * int(math.log2(p)) + 2) * a + (2 * (q - 1) / q + 2) * S * b +
            ((q - 1) / q + 1) * S * P["gamma"])


def nhr(P, p, S, a, b):
    """HCCL's NHR allreduce: ceil(log2 p) steps each way, any p."""
    return 2 * lg(p) * a + 2 * (p - 1) / p * S * b + (p - 1) / p * S * P["gamma"]


def rdouble(P, p, S, a, b):
    """Recursive doubling of whole vectors (ddpc's small messages), with the
    fold for p not a power of two."""
    q = 1 << int(math.log2(p)) if p > 1 else 1
    fold = 2 * (a + S * b) + S * P["gamma"] if q != p else 0
    return int(math.log2(q)) * (a + S * b + S * P["gamma"]) + fold


def flat(P, H, L, S):
    """ddpc's flat allreduce on H hosts of L ranks numbered host by host:
    recursive doubling up to 64 KiB (its first log2 L steps inside hosts,
    the rest across, every rank of a host sending S through its link at
    once), else one ring over all N = H L ranks crossing every host boundary once
    each way: each step moves S/N on every link at once, so it takes as long
    as the slower of a host's link and its shared memory."""
    N = H * L
    if S <= SMALL:
        return rdouble(P, L, S, P["alpha_l"], P["beta_l"]) + rdouble(P, H, S, P["alpha"], P["beta"] * L)
    step = max(P["alpha"] + S / N * P["beta"], P["alpha_l"] + S / N * P["beta_l"] if L > 1 else 0)
    return 2 * (N - 1) * step + (N - 1) / N * S * P["gamma"]


CHUNK = 256 << 10  # DDPC_CHUNK

# The candidates of DDPC_ALGO=auto across hosts (src/coll/tuner_cost.c, the same
# formulas): s bytes a member, h members, f of a host's ranks sharing its link.

def t_ring(P, h, s, f):
    """The ring reduces each chunk while the next is on the wire: of its
    reduction only a chunk a step shows."""
    if h < 2:
        return 0
    return (2 * (h - 1) * P["alpha"] + 2 * (h - 1) / h * s * f * P["beta"] +
            (h - 1) * min(s / h, CHUNK) * P["gamma"])


def t_fold(P, h, s, f):
    return 0 if h & (h - 1) == 0 else 2 * P["alpha"] + 2 * s * f * P["beta"] + s * P["gamma"]


def t_hd(P, h, s, f):
    if h < 2:
        return 0
    k = int(math.log2(h))
    q = ((1 << k) - 1) / (1 << k)
    return 2 * k * P["alpha"] + 2 * q * s * f * P["beta"] + q * s * P["gamma"] + t_fold(P, h, s, f)


def t_rd(P, h, s, f):
    if h < 2:
        return 0
    return int(math.log2(h)) * (P["alpha"] + s * f * P["beta"] + s * P["gamma"]) + t_fold(P, h, s, f)


def hier_plan(P, H, L, S, equal=True):
    """auto's choice (model.c's ddpc__model_plan): {way: seconds} and the
    way chosen, with the pieces of the pipelined ring. small: trees in the
    host around recursive doubling across host leaders; ring, hd (H-D_R),
    rd: ring reduce-scatter in the host, that algorithm across hosts (each
    of a host's L ranks carrying its S/L at once, so the link's beta counts
    L times), ring allgather in the host; the ring cut into P pieces whose
    host steps overlap the link where every host has L >= 2 ranks."""
    al, bl, g = P["alpha_l"], P["beta_l"], P["gamma"]
    q = (L - 1) / L
    host = 2 * (L - 1) * al + 2 * q * S * bl + q * S * g
    sl = S / L
    t = {"small": lg(L) * (2 * al + 2 * S * bl + S * g) + t_rd(P, H, S, 1) if L > 1 else math.inf,
         "ring": host + t_ring(P, H, sl, L), "hd": host + t_hd(P, H, sl, L),
         "rd": host + t_rd(P, H, sl, L)}
    pieces = 1
    p = 1  # the most pieces (up to 16) whose ring blocks keep 2 chunks
    while equal and L > 1 and p < 16 and sl / (2 * p) / H >= 2 * CHUNK:
        p *= 2
    if p > 1:
        inter = p * t_ring(P, H, sl / p, L) + (p - 1) * (P["alpha"] + CHUNK * P["beta"])
        tp = host / p + max(inter, host * (p - 1) / p)
        if tp < t["ring"]:
            t["ring"], pieces = tp, p
    best = "ring"
    for way in ("small", "hd", "rd"):
        if t[way] < t[best] * (1 - 1e-9):
            best = way
    return t, best, pieces if best == "ring" else 1


def hier(P, H, L, S, inter="auto"):
    """ddpc's hierarchical allreduce (src/coll/hier.c): auto's choice, or
    the ring (unpipelined) or H-D_R ("rhd") across hosts as HCCL_ALGO's
    level1 forces."""
    t, best, _ = hier_plan(P, H, L, S)
    if inter == "auto":
        return t[best]
    al, bl, g = P["alpha_l"], P["beta_l"], P["gamma"]
    q = (L - 1) / L
    host = 2 * (L - 1) * al + 2 * q * S * bl + q * S * g
    return host + {"ring": t_ring, "rhd": t_hd}[inter](P, H, S / L, L)


def auto_name(P, H, L, S):
    _, best, pieces = hier_plan(P, H, L, S)
    name = {"small": "trees + RD", "ring": "ring", "hd": "H-D_R", "rd": "RD"}[best]
    return f"{name} x{pieces}" if pieces > 1 else name


def busbw(S, N, t):
    return S / t * 2 * (N - 1) / N / 1e9


# ---------------------------------------------------------------- output

def fmt_t(t):
    if t >= 1:
        return f"{t:.2f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.1f} ms"
    return f"{t * 1e6:.0f} us"


def fit(m):
    """Each parameter from the runs where it dominates, taking the least
    (this machine's other work only ever adds time): beta from ring
    allgather of 32 MiB on 2 and 4 hosts x 1 rank, the least time per byte
    on the link ((n-1)/n S); alpha from allgather of 4 KiB, the least time
    per step less its beta term; beta_l and alpha_l the same way on 1 host x
    2 ranks; gamma from reduce-scatter minus allgather of 32 MiB on 1 x 2
    (the same bytes moved, reduced once more), per byte reduced."""
    def t(lay, coll, S):
        v = m.get((lay, coll, "flat", S))
        if v is None:
            sys.exit(f"costmodel: no {lay} {coll} run of {S} bytes")
        return v
    big, small = 32 * MiB, 4 << 10
    lays = (("2x1", 2), ("4x1", 4))
    b = min(t(lay, "allgather", big) / ((n - 1) / n * big) for lay, n in lays)
    a = min(t(lay, "allgather", small) / (n - 1) - small / n * b for lay, n in lays)
    bl = t("1x2", "allgather", big) / (big / 2)
    al = t("1x2", "allgather", small) - small / 2 * bl
    g = max(0.0, (t("1x2", "reduce-scatter", big) - t("1x2", "allgather", big)) / (big / 2))
    P = {"alpha": a, "beta": b, "alpha_l": al, "beta_l": bl, "gamma": g}
    res = []
    for (lay, coll, algo, S), v in sorted(m.items()):
        if coll not in ("allgather", "reduce-scatter") or lay not in ("1x2", "2x1", "4x1"):
            continue
        n = int(lay[0]) * int(lay[2])
        A, B = (al, bl) if lay == "1x2" else (a, b)
        G = g if coll == "reduce-scatter" else 0.0
        res.append((lay, coll, S, ((n - 1) * A + (n - 1) / n * S * (B + G)) / v))
    return P, res


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    d = sys.argv[1]
    info = dict(line.rstrip("\n").split(" ", 1) for line in open(os.path.join(d, "info")))
    m = load(d)
    P, res = fit(m)
    L = int(os.environ.get("RANKS_PER_HOST", "8"))
    wg, wus = float(os.environ.get("WHATIF_GBIT", "100")), float(os.environ.get("WHATIF_US", "10"))
    out = []
    w = out.append
    w("# The cost model: ddpc's allreduce from 2 to 1,024 hosts\n")
    w("Generated by `bench/costmodel.sh` (root: it builds the emulated cluster and runs "
      "ddpc-bench) and `bench/costmodel.py` (the fit and this page, from the last runs: "
      "`/usr/bin/python3 bench/costmodel.py build/bench/costmodel > docs/COSTMODEL.md`). "
      "Do not edit by hand.\n")
    w(f"Runs of {info.get('date', '?')}, commit {info.get('commit', '?')}, "
      f"{info.get('cpus', '?')} CPUs shared with other work (load average "
      f"{info.get('load', '?')} at the start, {info.get('load_end', '?')} at the end), "
      f"links {info.get('rate', '?')} each way (tc tbf; no netem on this kernel, so no added "
      f"delay: alpha is what veth, the bridge and TCP give). Each figure is the least over "
      f"{info.get('rounds', '?')} interleaved rounds of ddpc-bench's median over "
      f"{info.get('iters', '?')} timed calls: the round least disturbed by the other work.\n")
    w("## The model\n")
    w("A message of n bytes between two ranks costs alpha + n beta; reducing n bytes costs "
      "n gamma (Hockney's model, with gamma as in HCCL's algorithm pages). Between hosts "
      "(alpha, beta) is the host's link, which all of a host's ranks share; inside a host "
      "(alpha_l, beta_l) is shared memory. S is the vector's bytes, p the members of one "
      "algorithm, H hosts of L ranks, N = H L.\n")
    w("| algorithm | allreduce time | HCCL's published formula |")
    w("|---|---|---|")
    w("| ring (ddpc flat, large) | 2(p-1) alpha + 2(p-1)/p S beta + (p-1)/p S gamma | the same "
      "(Ring.md) |")
    w("| recursive halving-doubling (ddpc `rhd`, large; HCCL H-D_R; across hosts where the model picks it), p = 2^k | 2 log2(p) alpha + "
      "2(p-1)/p S beta + (p-1)/p S gamma | the same (RHD.md) |")
    w("| the same, p not a power of two (fold to p' = 2^floor(log2 p)) | (2 floor(log2 p) + 2) "
      "alpha + (2(p'-1)/p' + 2) S beta + ((p'-1)/p' + 1) S gamma | the same (RHD.md); ddpc "
      "folds the same way |")
    w("| NHR (HCCL only) | 2 ceil(log2 p) alpha + 2(p-1)/p S beta + (p-1)/p S gamma | NHR.md; "
      "ddpc has no NHR. For p a power of two (every host count below) it costs what H-D_R "
      "does; otherwise 2 ceil(log2 p) alpha against H-D_R's fold of 2 more steps and 2 S "
      "beta |")
    w("| recursive doubling (ddpc flat, S <= 64 KiB; across hosts where the model picks it) | ceil(log2 p) (alpha + S beta + S gamma), "
      "plus 2 alpha + 2 S beta + S gamma to fold p not a power of two | - |")
    w("| ddpc hier, large | 2(L-1) alpha_l + 2(L-1)/L S beta_l + (L-1)/L S gamma (ring "
      "reduce-scatter and allgather in the host) + the step across hosts: each of a host's L "
      "ranks allreduces its S/L over H members at once, sharing the link, so its beta counts "
      "L times: a ring costs 2(H-1) alpha + 2(H-1)/H S beta + (H-1)/(H L) S gamma; H-D_R and "
      "recursive doubling as above on S/L | HCCL's two levels: server reduce-scatter, "
      "inter-server allreduce, server allgather |")
    w("| ddpc hier, the ring pipelined in P pieces (every host L ranks) | (host steps)/P + "
      "max(P rings of S/P across hosts + (P-1)(alpha + chunk beta), (P-1)/P (host steps)): "
      "the host's steps of one piece overlap the link's ring of another | HCCL's pipeline "
      "algorithm overlaps the levels too |")
    w("| ddpc hier, small | ceil(log2 L)(2 alpha_l + 2 S beta_l + S gamma) + recursive "
      "doubling over the H hosts' first ranks | - |")
    w("")
    w("The flat ring over N ranks numbered host by host crosses each host boundary once each "
      "way, so its link carries 2(N-1)/N S; the hierarchical one's carries 2(H-1)/H S. With "
      "L = 2 on 2 hosts that is 1.5 S against S: at most 1.5x from the link alone (measured "
      "below and in docs/BENCHMARKS.md). The latency term is what grows with the hosts: a "
      "ring across H hosts takes 2(H-1) steps, H-D_R and NHR 2 log2 H.\n")
    w("## Fitted parameters\n")
    w("| parameter | value | from |")
    w("|---|---|---|")
    w(f"| alpha (link) | {P['alpha'] * 1e6:.1f} us | ring allgather of 4 KiB on 2 and 4 hosts x "
      "1 rank: the least time per step, less its beta term |")
    w(f"| beta (link) | {P['beta'] * 1e9:.3f} ns/B = {1 / P['beta'] / 1e9:.3f} GB/s | ring "
      "allgather of 32 MiB on 2 and 4 hosts x 1 rank: the least time per byte on the link |")
    w(f"| alpha_l (shared memory) | {P['alpha_l'] * 1e6:.1f} us | allgather of 4 KiB on 1 host x "
      "2 ranks |")
    w(f"| beta_l | {P['beta_l'] * 1e9:.3f} ns/B = {1 / P['beta_l'] / 1e9:.2f} GB/s | allgather "
      "of 32 MiB on 1 host x 2 ranks |")
    w(f"| gamma (float32 sum) | {P['gamma'] * 1e9:.3f} ns/B"
      + (f" = {1 / P['gamma'] / 1e9:.2f} GB/s" if P["gamma"] > 0 else " (below the noise)") +
      " | reduce-scatter minus allgather of 32 MiB on 1 host x 2 ranks, per byte reduced |")
    w("")
    w("Each parameter comes from the runs where it dominates, the least over the rounds, "
      "since other work only adds time. The model against every fit run (model / measured; "
      "below 1 where the machine's load slowed the run): " +
      ", ".join(f"{lay} {coll} {S >> 10} KiB {r:.2f}" for lay, coll, S, r in res) + ".\n")
    w("## The model beside measured allreduce\n")
    w("float32 sum, ddpc-bench under DDPC_ALGO=flat and hier, in the same run as the fit "
      "(least over the rounds, as above).\n")
    w("| layout | size | flat measured | flat model | hier measured | hier model | "
      "hier/flat measured | model |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|")
    for lay in ("2x2", "4x2"):
        H, Lh = int(lay[0]), int(lay[2])
        for S in (MiB, 64 * MiB):
            mf, mh = m.get((lay, "allreduce", "flat", S)), m.get((lay, "allreduce", "hier", S))
            if mf is None or mh is None:
                continue
            pf, ph = flat(P, H, Lh, S), hier(P, H, Lh, S)
            w(f"| {H} x {Lh} | {S // MiB} MiB | {fmt_t(mf)} | {fmt_t(pf)} | {fmt_t(mh)} | "
              f"{fmt_t(ph)} | {mf / mh:.2f}x | {pf / ph:.2f}x |")
    w("")

    def table(P, title):
        w(f"### {title}\n")
        w(f"Allreduce of DDP's bucket sizes (PyTorch's default bucket is 25 MiB) on H hosts of "
          f"L = {L} ranks; time, and bus bandwidth (nccl-tests': S/t x 2(N-1)/N). "
          "ddpc auto is hier with the cost model's choice across hosts (src/coll/tuner_cost.c: "
          "trees + RD = trees in the host around recursive doubling; ring xP = the ring "
          "pipelined in P pieces; H-D_R; RD = recursive doubling).\n")
        w("| hosts | ranks | bucket | flat ring | hier, ring across hosts | "
          "hier, H-D_R across hosts | ddpc auto (its choice) |")
        w("|---:|---:|---:|---:|---:|---:|---:|")
        for H in (8, 64, 256, 1024):
            N = H * L
            for S in (MiB, 25 * MiB, 100 * MiB):
                ts = [flat(P, H, L, S), hier(P, H, L, S, "ring"), hier(P, H, L, S, "rhd"),
                      hier(P, H, L, S)]
                w(f"| {H} | {N} | {S // MiB} MiB | " + " | ".join(
                    f"{fmt_t(t)}, {busbw(S, N, t):.3f} GB/s" for t in ts) +
                  f" ({auto_name(P, H, L, S)}) |")
        w("")

    w("## Projection to 1,024 hosts\n")
    w(f"Assumptions: every host has L = {L} ranks (RANKS_PER_HOST=), all hosts on one "
      "non-blocking switch (each host's link its own, no congestion at the core), the fitted "
      "intra-host parameters for any L (on this 2-CPU machine they are CPU-bound), no "
      "overlap with computation, float32 sum, ranks numbered host by host. Not in the model: "
      "stragglers, TCP's slow start and losses, the chunked pipeline's fill time.\n")
    table(P, f"With the fitted link ({1 / P['beta'] * 8 / 1e9:.2f} Gbit/s, alpha "
             f"{P['alpha'] * 1e6:.0f} us)")
    Q = dict(P, alpha=wus * 1e-6, beta=8 / (wg * 1e9))
    table(Q, f"What if: a {wg:g} Gbit/s link with alpha {wus:g} us (WHATIF_GBIT=, WHATIF_US=), "
             "the rest as fitted")
    S = 25 * MiB
    f8, h8 = flat(P, 8, L, S), hier(P, 8, L, S)
    hr, hd = hier(P, 1024, L, MiB, "ring"), hier(P, 1024, L, MiB, "rhd")
    qf, qh = flat(Q, 8, L, S), hier(Q, 8, L, S)
    w(f"Reading: with the fitted link the hierarchical allreduce of a 25 MiB bucket on 8 hosts "
      f"takes {fmt_t(h8)} against the flat ring's {fmt_t(f8)} ({f8 / h8:.2f}x): its link "
      f"carries 2(H-1)/H S against 2(N-1)/N S. As hosts are added the ring's 2(H-1) latency "
      f"steps across hosts take over the small buckets: at 1,024 hosts a 1 MiB bucket takes "
      f"{fmt_t(hr)} with a ring across hosts and {fmt_t(hd)} with H-D_R ({hr / hd:.1f}x): "
      f"auto's cost model (src/coll/tuner_cost.c, the formulas above with DDPC_NET_US and "
      f"DDPC_NET_GBIT for the link) switches the step across hosts to H-D_R there, and "
      f"keeps the pipelined ring where the vector is large and the hosts few. ")
    if qh > qf:
        w(f"With a fast link the intra-host steps, which run one after the other with the step "
          f"across hosts, weigh: on 8 hosts the what-if gives hier {fmt_t(qh)} against flat "
          f"{fmt_t(qf)}, as this machine's shared memory ({1 / Q['beta_l'] / 1e9:.1f} GB/s) is "
          f"slower than a {wg:g} Gbit/s link and the flat ring overlaps both in one pipeline "
          f"(HCCL's pipeline algorithm overlaps them too).\n")
    else:
        w(f"With the what-if link, on 8 hosts: hier {fmt_t(qh)}, flat {fmt_t(qf)} "
          f"({qf / qh:.2f}x).\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
