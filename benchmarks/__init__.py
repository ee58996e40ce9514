"""Benchmarks (not tests): commands that print a table and write JSON.

    python -m benchmarks engine   # the engine alone: HF generate, generate_batch, Tandem
    python -m benchmarks e2e      # the running platform over websockets vs the engine
"""
