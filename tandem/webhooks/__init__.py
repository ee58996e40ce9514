"""Signed webhooks: a tenant's endpoints, the events the chat emits to them, and their
delivery on the CPU tier's `webhooks` queue (docs/webhooks.md)."""
