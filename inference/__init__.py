"""Inference: the request's path through the tiers, and the model engine behind it.

One folder per layer, highest first (import-linter checks the order; see
docs/architecture.md):

- `tasks`      Celery entry points, one per hop; nothing imports them back.
- `pipeline/`  the request lifecycle: `api` (all the web tier sees: submit, cancel),
               the web/CPU rendezvous, one module per hop (cpu, prefill, decode,
               colocated), and `outcomes`, which reports how a reply ended to the sink
               the web tier registers (nothing here imports `tandem`).
- `worker/`    a model worker process: its runtime, config, start-up signals, heartbeats,
               cancel listening and the prefill batcher.
- `wire/`      what crosses process boundaries: Redis keys, the request spec, token
               streams, broker sends, worker liveness, the Redis connection.
- `text/`      tokenizer, input validation, prompt building, detokenizing.
- `kvstore/`   the KV cache hand-off from a prefill worker to a decode worker.
- `engine/`    the model engine (plain torch + transformers); imports nothing of ours.
"""
