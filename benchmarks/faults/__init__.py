"""`python -m benchmarks faults`: workers killed under load, and what the clients saw."""
