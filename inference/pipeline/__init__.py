"""The request lifecycle across tiers, one module per hop: web `submit` → CPU tier
(`cpu`) → the `rendezvous` between them → `prefill` → `decode` (or `colocated` for both),
with `follower` streaming a sequence's tokens and `outcomes` writing how a reply ended.
Each hop sends the next by task name (`wire.broker`), never by importing `tasks`.

The web tier sees only `api` (check text, route, submit, cancel) and reports nothing
back: the pipeline reports how replies go to the sink the web tier registers
(`contracts.ReplySink`, `sink`), and imports nothing of `tandem`."""
