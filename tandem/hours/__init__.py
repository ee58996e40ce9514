"""Business hours: a tenant's weekly schedule, in its time zone, with holidays
(docs/widget.md, "Business hours"). Outside them a hand-over offers the widget's offline
form at once and says when the team is back; the assistant keeps answering.

models.py (the schedule), schedule.py (open now? back when? pure, no database),
services.py / selectors.py (saving and reading a tenant's), forms.py and views.py (the
console page under the tenant's Assistant settings), texts.py (what the assistant says
when nobody can take the conversation)."""
