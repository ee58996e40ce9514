"""`python -m benchmarks knowledge`: retrieval latency, quality, CPU-tier cost and prefix-cache reuse."""
