"""The GPU check's PyTorch workload: a fixed number of training-like steps (bf16 matmuls, an
activation, a reduction, a host copy every 10 steps), each in an NVTX range, so that two runs
launch the same kernels and copies. Prints steps per second over the timed steps.

    python3 torch_loop.py STEPS [SECONDS]    # SECONDS: keep stepping until then (coordinator mode)
"""
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
dev = torch.device("cuda")
torch.manual_seed(0)
a = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
w = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
z = torch.zeros(2048, device=dev)
host = torch.empty(2048, pin_memory=True)


def step(i):
    torch.cuda.nvtx.range_push("step")
    y = torch.relu(a @ w)
    s = y.float().sum(dim=0)
    z.add_(s)
    if i % 10 == 0:
        host.copy_(z, non_blocking=False)
    torch.cuda.nvtx.range_pop()


for i in range(5):  # warm-up: cuBLAS handles, allocations
    step(i)
torch.cuda.synchronize()
t0 = time.perf_counter()
done = 0
while done < steps or time.perf_counter() - t0 < seconds:
    step(done)
    done += 1
torch.cuda.synchronize()
dt = time.perf_counter() - t0
print(f"torch_loop: {done} steps in {dt:.3f} s: {done / dt:.1f} steps/s", flush=True)
