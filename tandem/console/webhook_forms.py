"""The console's webhook endpoint form: the URL, the event types to send, a description.
The values are checked again by `tandem.webhooks.services`, whose refusal lands on the
field it names."""

from __future__ import annotations

from django import forms

from tandem.webhooks.models import EVENT_TYPES, Endpoint


class EndpointForm(forms.Form):
    # A text input (styled like the console's other fields), typed for URLs on phones.
    url = forms.URLField(label="Endpoint URL", max_length=2000, assume_scheme="https",
                         widget=forms.TextInput(attrs={"inputmode": "url", "spellcheck": "false"}),
                         help_text="http(s) on a public address; Tandem POSTs each event here, signed.")
    events = forms.MultipleChoiceField(label="Events to send", choices=[(e, e) for e in EVENT_TYPES],
                                       widget=forms.CheckboxSelectMultiple)
    description = forms.CharField(label="Description", max_length=200, required=False)

    @classmethod
    def initial_for(cls, endpoint: Endpoint) -> dict:
        return {"url": endpoint.url, "events": list(endpoint.events), "description": endpoint.description}
