"""`python -m benchmarks e2e`: the running platform over websockets beside the engine alone (see run.py)."""
