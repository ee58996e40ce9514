"""The decode step on a CUDA GPU, with its memory-bandwidth utilisation:
`python -m benchmarks.engine.gpu_step`.

Issue 17's GPU check: DecoderModel.forward, one token per row, in bf16 on the GPU (SDPA
attention, as the engine runs there), at given batch sizes and cache lengths, timed with
the device synchronised around each step. MBU = the bytes a step must read (weights and
the KV its attention reads) / its median time / the device's bandwidth, measured here as a
device-to-device copy (read + write bytes / time) and, where --peak-gbs names it, against
the vendor's figure too. A machine without a CUDA device says so and exits 2: nothing on a
CPU depends on this. Written for the device machine's prepared checks; not yet run on one
(no GPU has been lent to this project's sessions since it was written).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from ..paths import MODEL_DIR
from .step import kv_bytes_read, make_step, weight_bytes


def copy_bandwidth_gbs(torch, size_bytes: int = 2**30, reps: int = 10) -> float:
    """Best device-to-device copy rate, counting the bytes read and written."""
    src = torch.empty(size_bytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return 2 * size_bytes / best / 1e9


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.engine.gpu_step", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(MODEL_DIR))
    p.add_argument("--batches", default="1,32,64,128")
    p.add_argument("--context", type=int, default=512, help="cached positions per row (default 512)")
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--peak-gbs", type=float, default=None, help="the device's nominal bandwidth (H200: 4800)")
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device here: the GPU decode step was not measured", file=sys.stderr)
        sys.exit(2)
    from inference.engine.config import EngineConfig
    from inference.engine.loader import load_model

    model = load_model(EngineConfig(model=args.model, device="cuda", dtype="bfloat16",
                                    max_context=max(1024, args.context + 8))).model
    bw = copy_bandwidth_gbs(torch)
    name = torch.cuda.get_device_name(0)
    print(f"{name}; torch {torch.__version__}, CUDA {torch.version.cuda}; copy bandwidth {bw:.0f} GB/s"
          + (f"; nominal {args.peak_gbs:.0f} GB/s" if args.peak_gbs else ""))
    print("| batch | context | step p50 ms | tok/s | bytes/step MB | MBU (copy) | MBU (nominal) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for batch in (int(x) for x in args.batches.split(",") if x):
        step = make_step(model, batch, args.context)
        for _ in range(5):
            step()
        times = []
        for _ in range(args.rounds):
            torch.cuda.synchronize()
            t = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        med = statistics.median(times)
        moved = weight_bytes(args.model, "bfloat16") + kv_bytes_read(model, batch, args.context)
        nominal = f"{moved / med / (args.peak_gbs * 1e9) * 100:.0f}%" if args.peak_gbs else "n/a"
        print(f"| {batch} | {args.context} | {med * 1e3:.2f} | {batch / med:.0f} | {moved / 1e6:.0f} "
              f"| {moved / med / (bw * 1e9) * 100:.0f}% | {nominal} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
