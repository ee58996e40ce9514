"""Tenant → Knowledge → Test retrieval: a question in, the tenant's ranked chunks and
their scores out, retrieved by the CPU tier itself (`knowledge.probe`: a CPU worker runs
`knowledge.selectors.retrieve` with the tenant's language and mode; questions are never
embedded on the web tier), and which of them a reply would be given: the top k that
reach the minimum score. A few more than k are shown, each marked, so a tenant can see
what its settings keep and what they leave out. No CPU worker answering in time is a
503 that says so, the question kept in the form."""

from __future__ import annotations

from django import forms
from django.conf import settings

from knowledge import probe, selectors
from tandem.db_pool import give_back_connections

from .base import render_page, tenant_page

SHOWN = 10  # chunks listed, at least k


class RetrievalTestForm(forms.Form):
    q = forms.CharField(label="Question", max_length=500, strip=True,
                        help_text="As a visitor would ask it.")


@tenant_page(methods=("GET",))
def retrieval_test(request, access):
    s = selectors.settings_for(access.tenant)
    form = RetrievalTestForm(request.GET if "q" in request.GET else None)
    rows = None
    unanswered = None
    status = 200
    if form.is_bound and not form.is_valid():
        status = 400
    elif form.is_bound:
        give_back_connections()  # the wait for the CPU tier holds no database connection
        hits = probe.probe(tenant_id=access.tenant.pk, question=form.cleaned_data["q"], k=max(SHOWN, s.top_k),
                           language=s.language, mode=s.mode)
        if hits is None:
            unanswered, status = settings.TANDEM_KNOWLEDGE_PROBE_WAIT_S, 503
        else:
            # Hits come best first, so "the top k of those at or above the minimum" (what
            # a reply gets) is "the first k, less those under it".
            rows = [{"rank": n, "hit": h, "kept": n <= s.top_k and h.score >= s.min_score,
                     "why": f"beyond k = {s.top_k}" if n > s.top_k
                     else "below the minimum score" if h.score < s.min_score else ""}
                    for n, h in enumerate(hits, 1)]
    return render_page(request, "console/knowledge_retrieval.html",
                       {"form": form if form.is_bound else RetrievalTestForm(), "rows": rows, "settings": s,
                        "unanswered": unanswered},
                       access=access, nav="knowledge", status=status)
