"""Benchmarks (not tests): commands that print tables and write JSON under var/bench/.

    python -m benchmarks engine     # the engine alone: HF generate, generate_batch, Tandem
    python -m benchmarks e2e        # the running platform over websockets vs the engine alone
    python -m benchmarks fairness   # one tenant flooding, another's time to first token

Each suite is a package with a `run` module (its options and main). What they share sits
beside them: `report` (progress, tables, JSON), `stats`, `machine` (what a measurement ran
on), `cores` (pinning and nice from outside a process), `traces` (one request as the
benchmark saw it), and `platform/` for the suites that start the platform. They measure
the product's own code: the engines, the prefill batcher and the KV store, the workers
started as `make run` starts them.
"""
