"""A small training-loop-shaped program that annotates its phases with NVTX ranges (the PyPI
`nvtx` package). `cargo xtask demo` runs it under `nsight-agent`; it needs no GPU.

Usage: python nvtx_sample.py [SECONDS]   (default 30; it prints one line per epoch)
"""

import sys
import time

import nvtx

DOMAIN = nvtx.get_domain("demo")


def work(seconds):
    # Busy enough to be visible, short enough to keep the demo quick.
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    deadline = time.monotonic() + seconds
    epoch = 0
    while time.monotonic() < deadline:
        with nvtx.annotate("epoch", color="blue", domain="demo"):
            for _ in range(5):
                with nvtx.annotate("train_step", color="green", domain="demo"):
                    with nvtx.annotate("forward", domain="demo"):
                        work(0.004)
                    with nvtx.annotate("backward", domain="demo"):
                        work(0.008)
                    nvtx.mark("step_done", domain="demo")
            with nvtx.annotate("evaluate", color="red", domain="demo"):
                work(0.01)
        epoch += 1
        print(f"epoch {epoch}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
