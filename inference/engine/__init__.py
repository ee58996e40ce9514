"""The model engine: plain torch + transformers, importing nothing from Django or Celery.

It owns model weights, the KV cache, sequences in flight and sampling. It takes token
ids and returns token ids, KV caches and timings; it knows nothing of tenants. It can be
imported, tested and benchmarked on its own.
"""
