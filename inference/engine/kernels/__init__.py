"""CPU kernels of our own, in C, compiled at run time for the CPU they run on.

Only where torch has no kernel that fits the engine's shapes (decode_attention.c says
why for its one). build.py compiles and caches them; each has a ctypes wrapper
(decode_attention.py) that says whether it is available and otherwise leaves the engine
on torch's own kernels.
"""
