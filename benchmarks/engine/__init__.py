"""`python -m benchmarks engine`: the model engine alone against Hugging Face (see run.py)."""
