"""What crosses a process boundary: Redis keys, the request spec, token streams, broker
sends and worker liveness. No Django models, no engine."""
