"""Actions: HTTP calls a tenant's admins define, which the assistant may make in the
tenant's widget conversations as tools (docs/actions.md). Definitions and their
validation (definitions.py, services.py), what a submission offers the model (offer.py),
what happens when a reply ends with a call (calls.py), approval by a person
(approvals.py), the run on the CPU tier's `actions` queue (runner.py, outbound.py,
tasks.py), the reply that continues after it (continuation.py), and the console pages
(forms.py, views.py, urls.py)."""
