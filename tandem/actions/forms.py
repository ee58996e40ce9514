"""The console's action form. Values are checked again by `definitions` (through the
services), whose refusal lands on the field it names. The secret header's value is a
password field that is never filled back in: empty keeps the stored value."""

from __future__ import annotations

import json

from django import forms

from .models import Action


class ActionForm(forms.Form):
    name = forms.CharField(label="Name", max_length=64, help_text="The function name the assistant calls, e.g. "
                           "order_status: letters, digits and underscores.")
    description = forms.CharField(label="Description", max_length=1000, widget=forms.Textarea(attrs={"rows": 2}),
                                  help_text="For the assistant: what it does and when to use it.")
    status_text = forms.CharField(label="Status line", max_length=120, required=False,
                                  help_text="What the visitor reads while it runs, e.g. “Looking up your order…”.")
    parameters = forms.CharField(label="Parameters (JSON schema)", widget=forms.Textarea(attrs={"rows": 6,
                                 "spellcheck": "false", "class": "mono"}), required=False,
                                 help_text='An object schema, e.g. {"type": "object", "properties": {"order_id": '
                                           '{"type": "string"}}, "required": ["order_id"]}.')
    method = forms.ChoiceField(label="Method", choices=Action.Method.choices)
    url_template = forms.CharField(label="URL", max_length=2000, widget=forms.TextInput(attrs={"spellcheck": "false",
                                   "inputmode": "url"}),
                                   help_text="http(s) on a public address; {parameter} placeholders in the path or "
                                             "query are filled URL-encoded. The other arguments go in the JSON body "
                                             "(POST, PUT, PATCH) or the query.")
    headers = forms.CharField(label="Headers", required=False, widget=forms.Textarea(attrs={"rows": 2,
                              "spellcheck": "false"}), help_text="One 'Name: value' a line, sent as they are.")
    secret_header_name = forms.CharField(label="Secret header name", max_length=100, required=False,
                                         help_text="e.g. Authorization. Empty: none.")
    secret_header_value = forms.CharField(label="Secret header value", max_length=4000, required=False,
                                          widget=forms.PasswordInput(render_value=False),
                                          help_text="Stored encrypted and shown once. Empty keeps the stored value.")
    timeout_s = forms.FloatField(label="Timeout (seconds)", initial=5.0)
    who = forms.ChoiceField(label="Who may trigger it", choices=Action.Who.choices, initial=Action.Who.VERIFIED)
    needs_approval = forms.BooleanField(label="A person approves each call", required=False)
    trigger_phrases = forms.CharField(label="Trigger phrases", required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                      help_text="One a line: a visitor's message containing one makes the assistant "
                                                "call this action at once.")
    enabled = forms.BooleanField(label="Enabled", required=False, initial=True)

    @classmethod
    def initial_for(cls, action: Action) -> dict:
        return {"name": action.name, "description": action.description, "status_text": action.status_text,
                "parameters": json.dumps(action.parameters, indent=2), "method": action.method,
                "url_template": action.url_template,
                "headers": "\n".join(f"{k}: {v}" for k, v in action.headers.items()),
                "secret_header_name": action.secret_header_name, "timeout_s": action.timeout_s, "who": action.who,
                "needs_approval": action.needs_approval, "trigger_phrases": action.trigger_phrases,
                "enabled": action.enabled}
