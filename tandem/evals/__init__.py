"""The evaluation harness (docs/outcomes.md#the-evaluation-harness): a tenant's test
questions with expectations, run through the real pipeline against the assistant as it
is configured now, each reply checked (retrieval, citation, phrases, hand-over,
repetition, length, latency). `manage.py assistant eval <tenant>` runs them and prints
the table; runs are stored, so two can be compared."""
