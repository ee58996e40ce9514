"""Development tooling for `make run` and the tests: the embedded Redis, starting the
platform's processes, and the one-command local stack (`python -m devstack`)."""
