"""The request lifecycle across tiers: Celery tasks, the KV store wiring, token streams,
worker heartbeats and routing a tenant to its pools. The model itself lives in
`inference.engine`, which imports nothing from Django or Celery."""
