"""Runs a seed program's train() (its __main__ arguments from the
environment) and prints how long it took on rank 0: `train_s SECONDS`.
    python bench/torch_npu_train.py SCRIPT   (under torchrun)"""
import os
import runpy
import sys
import time

g = runpy.run_path(sys.argv[1], run_name="seed")
rank = int(os.environ["RANK"])
start = time.perf_counter()
g["train"](rank, int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"]))
if rank == 0:
    print(f"train_s {time.perf_counter() - start:.3f}", flush=True)
