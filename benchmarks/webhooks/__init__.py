"""`python -m benchmarks webhooks`: webhook fan-out, alone and beside chats (issue 29)."""
