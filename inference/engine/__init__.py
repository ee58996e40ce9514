"""The model engine: plain torch + transformers, importing nothing from Django or Celery.

It owns model weights, the KV cache, sequences in flight, scheduling and sampling. It
takes token ids and returns token ids, KV caches and timings; it knows nothing of
tenants. It can be imported, tested and benchmarked on its own.

One noun per file:
- config.py, precision.py: what to run and how ("auto": the precision for this CPU and
  these weights); loader.py, prepare.py, tiny.py: the weights; gguf.py: the GGUF blocks
  they came from, for few-row matmuls; model_dir.py: which directory a model setting
  names (torch-free: the web and CPU tiers read the tokenizer there).
- model.py (the forward), linear.py (its matmuls: fp32, oneDNN-packed bf16, int8).
- scheduler.py: the one policy; each step a StepPlan (which sequences, how many tokens).
- runner.py: executes a plan; batch.py: the decode batch and its KV cache.
- engine_loop.py: the step thread (schedule, run, postprocess) of the decode engine
  (decode.py) and the colocated engine (colocated.py); prefill.py: the prefill engine,
  called by the prefill worker's batcher.
- sequence.py, sampling.py, kv.py, prefix_cache.py: what flows through them.
"""
