"""The PyTorch side of bench/mlp_gemm_bound.sh: the same five products as
bench/mlp_gemm.c (the MLP's fc1/fc2 forward, weight gradients and fc2's input
gradient at batch B) with torch.mm on one thread, best of 5 rounds. Prints one
JSON line with microseconds per product and their sum per step."""
import json, os, sys, time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402

torch.set_num_threads(1)
B = int(sys.argv[1]) if len(sys.argv) > 1 else 128
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
I, H = 784, 512
x, W1, W2 = torch.rand(B, I), torch.rand(H, I), torch.rand(H, H)
h, g = torch.rand(B, H), torch.rand(B, H)
ops = [("fc1_forward", lambda: torch.mm(x, W1.t())), ("fc2_forward", lambda: torch.mm(h, W2.t())),
       ("fc1_dweight", lambda: torch.mm(g.t(), x)), ("fc2_dweight", lambda: torch.mm(g.t(), h)),
       ("fc2_dinput", lambda: torch.mm(g, W2))]
out = {"peer": "torch.mm", "batch": B}
total = 0.0
for name, f in ops:
    best = 1e30
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        best = min(best, (time.perf_counter() - t0) / reps)
    out[name + "_us"] = round(best * 1e6, 1)
    total += best * 1e6
out["step_us"] = round(total, 1)
print(json.dumps(out))
