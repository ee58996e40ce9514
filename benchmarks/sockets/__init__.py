"""`python -m benchmarks sockets`: the web tier's real-time front door at scale (idle sockets, streaming beside them, slow clients)."""
