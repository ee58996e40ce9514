"""`python -m benchmarks fairness`: one tenant's flood against another's time to first token (see run.py)."""
