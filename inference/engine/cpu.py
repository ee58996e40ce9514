"""What this CPU can do, read at run time from /proc/cpuinfo (never assumed): the
features that decide which matmul kernels the engine uses and what "auto" serves."""

from __future__ import annotations

# vpdpbusd (VNNI) accumulates u8 x s8 products in int32; without it FBGEMM's AVX2 path
# sums pairs in int16, which saturates unless activations use 7 bits (reduce_range).
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_flags() -> set[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_has_bf16() -> bool:
    """Native bf16 matmul units (AMX-BF16 or AVX512-BF16)."""
    return bool(set(BF16_FLAGS) & cpu_flags())


def cpu_has_amx_bf16() -> bool:
    return "amx_bf16" in cpu_flags()


def cpu_has_vnni() -> bool:
    """int8 dot products accumulated in int32 (AVX512-VNNI, AVX-VNNI, AMX-INT8)."""
    return bool(set(VNNI_FLAGS) & cpu_flags())
