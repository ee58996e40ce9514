"""Trying a change to the assistant before visitors see it (docs/evals.md):

- `models`: test cases, runs and their results, and a tenant's draft of the settings;
- `drafts`: save, publish (by a person, audited) and discard a draft;
- `assistant_settings`: the live or the draft settings as a value a request's spec takes;
- `ask`: one question through the real pipeline with those settings, at a low priority;
- `services`: cases, and runs advanced in idempotent steps (`tasks`) on the CPU tier;
- `checks` and `report`: what a reply passes, and a run's totals as every surface shows them;
- `trial`: the console's "Try the assistant" chat; `selectors`: reads, two runs side by side.

`manage.py assistant eval <tenant> [--draft]` and `load-cases` are the commands."""
