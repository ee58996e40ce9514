"""CPU kernels of our own, in C, compiled at run time for the CPU they run on.

Only where torch has no kernel that fits the engine's shapes; each C file says why:
- decode_attention.c: a decode step's attention (with its RoPE and KV write);
- row_linear.c: one-row bf16 matmuls (a single decode stream);
- block_linear.c: fp32 matmuls of a few rows over a GGUF's Q4_1/Q8_0 weight blocks.
build.py compiles and caches them; each has a ctypes wrapper (decode_attention.py,
row_linear.py, block_linear.py) that says whether it can run here, otherwise the engine stays on torch's
own ops; calls.py splits a call across threads and names it in a profile.
"""
