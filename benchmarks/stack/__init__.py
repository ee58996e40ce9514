"""What the platform benchmarks (`e2e`, `fairness`) share: a throwaway site (its own
Redis, database and logs) with the platform started on it, tenants, the prompts they
send, a websocket chat client, and where a request's time went (`stages` from the marks
it left in Redis, `monitor` from Redis's MONITOR, `sampler` for the queues and batches).
"""
