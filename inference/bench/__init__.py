"""Benchmarks (not tests): commands that print a table and write JSON.

    python -m inference.bench engine   # the engine alone: HF generate, generate_batch, Tandem
    python -m inference.bench e2e      # the running platform over websockets vs the engine
"""
