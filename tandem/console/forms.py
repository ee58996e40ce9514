"""The console's forms: they parse and check what a person typed (types, ranges,
required fields) and hand plain values to the services, which hold the rules. A
service's ValidationError is put back on the form (`apply_errors`), so every refusal
is shown beside its field, never as a 500."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from tandem.chat.models import Conversation
from tenants.models import ApiKey, ComputePool, Membership
from tenants.services import MAX_DECODE_SLOTS, PRIORITY_RANGE

INT_MAX = 2_147_483_647  # PositiveIntegerField's range on every database
BIG_MAX = 9_223_372_036_854_775_807


def apply_errors(form: forms.Form, exc: ValidationError) -> None:
    """Attach a service's ValidationError to the form's fields (or the form)."""
    if hasattr(exc, "error_dict"):
        for name, errors in exc.message_dict.items():
            form.add_error(name if name in form.fields else None, errors)
    else:
        form.add_error(None, exc.messages)


class Form(forms.Form):
    """Labels read exactly as written (no ":" suffix): tests and screen readers find
    fields by them."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace(",", "\n").splitlines() if line.strip()]


class QuotaForm(Form):
    # Labelled exactly with the quota's names (docs/quotas.md); tests and screen readers
    # find the fields by them.
    requests_per_minute = forms.IntegerField(label="Requests per minute", min_value=0, max_value=INT_MAX)
    tokens_per_minute = forms.IntegerField(label="Tokens per minute", min_value=0, max_value=INT_MAX)
    max_concurrent_streams = forms.IntegerField(label="Max concurrent streams", min_value=0, max_value=INT_MAX)
    daily_token_budget = forms.IntegerField(label="Daily token budget", min_value=0, max_value=BIG_MAX)
    max_prompt_tokens = forms.IntegerField(label="Max prompt tokens", min_value=0, max_value=INT_MAX)
    max_output_tokens = forms.IntegerField(label="Max output tokens", min_value=0, max_value=INT_MAX)


class PoolChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, pool: ComputePool) -> str:
        flags = [pool.device] + (["dedicated"] if pool.dedicated else [])
        return f"{pool.queue} ({', '.join(flags)})"


class AllocationForm(Form):
    prefill_pool = PoolChoiceField(
        label="Prefill pool", queryset=ComputePool.objects.filter(role__in=["prefill", "colocated"]))
    decode_pool = PoolChoiceField(
        label="Decode pool", queryset=ComputePool.objects.filter(role__in=["decode", "colocated"]),
        help_text="For a colocated pool, pick the same pool in both.")
    priority = forms.IntegerField(label="Priority", min_value=PRIORITY_RANGE[0], max_value=PRIORITY_RANGE[1],
                                  help_text="Higher is served first in shared pools.")
    max_decode_slots = forms.IntegerField(label="Max decode slots", min_value=1, max_value=MAX_DECODE_SLOTS,
                                          help_text="This tenant's cap on a shared decode batch.")


class TenantCreateForm(Form):
    slug = forms.SlugField(label="Slug", max_length=64, help_text="Lower-case letters, digits and dashes; in URLs.")
    name = forms.CharField(label="Name", max_length=200)
    allowed_origins = forms.CharField(
        label="Widget origins", required=False, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="The sites the widget key works from, one per line, e.g. https://shop.example")

    def clean_allowed_origins(self):
        return _lines(self.cleaned_data["allowed_origins"])


class KeyCreateForm(Form):
    kind = forms.ChoiceField(label="Kind", choices=ApiKey.Kind.choices,
                             help_text="Secret keys (sk_…) are for servers; widget keys (pk_…) for web pages.")
    name = forms.CharField(label="Name", max_length=100, required=False)
    allowed_origins = forms.CharField(
        label="Allowed origins", required=False, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Widget keys only: one origin per line, e.g. https://shop.example")

    def clean_allowed_origins(self):
        return _lines(self.cleaned_data["allowed_origins"])

    def clean(self):
        data = super().clean()
        if data.get("kind") == ApiKey.Kind.SECRET and data.get("allowed_origins"):
            self.add_error("allowed_origins", "Secret keys have no allowed origins: leave this empty.")
        return data


class OriginsForm(Form):
    allowed_origins = forms.CharField(
        label="Allowed origins", required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One origin per line, e.g. https://shop.example")

    def clean_allowed_origins(self):
        return _lines(self.cleaned_data["allowed_origins"])


class AssistantForm(Form):
    """The assistant page's form: the persona now. The widget's appearance fields join
    here as another fieldset (`FIELDSETS`) when the widget stores them on the tenant."""

    system_prompt = forms.CharField(
        label="System prompt", required=False, max_length=8000, widget=forms.Textarea(attrs={"rows": 8}),
        help_text="The support persona: always the first message of every prompt.")

    FIELDSETS = [("Persona", ["system_prompt"])]

    def fieldsets(self):
        return [(title, [self[name] for name in names]) for title, names in self.FIELDSETS]


class MemberAddForm(Form):
    user = forms.CharField(label="Username or e-mail", max_length=254)
    role = forms.ChoiceField(label="Role", choices=Membership.Role.choices, initial=Membership.Role.VIEWER)


class MemberRoleForm(Form):
    role = forms.ChoiceField(label="Role", choices=Membership.Role.choices)


class PoolEditForm(Form):
    device = forms.CharField(label="Device", max_length=64, help_text="e.g. cpu, cuda:0, h200")
    dedicated = forms.BooleanField(label="Dedicated", required=False,
                                   help_text="Serves only the tenants allocated to it.")
    max_batch = forms.IntegerField(label="Max batch", min_value=1, max_value=INT_MAX,
                                   help_text="Decode slots per worker.")
    description = forms.CharField(label="Description", required=False, max_length=2000,
                                  widget=forms.Textarea(attrs={"rows": 2}))


class PoolCreateForm(PoolEditForm):
    slug = forms.SlugField(label="Slug", max_length=64,
                           help_text="With the role, names the workers' queue: <role>.<slug>.")
    role = forms.ChoiceField(label="Role", choices=ComputePool.Role.choices)
    field_order = ["slug", "role", "device", "dedicated", "max_batch", "description"]


class ConversationFilterForm(Form):
    channel = forms.ChoiceField(label="Channel", required=False,
                                choices=[("", "Any channel"), *Conversation.Channel.choices])
    status = forms.ChoiceField(label="Status", required=False,
                               choices=[("", "Any status"), *Conversation.Status.choices])
    since = forms.DateField(label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(label="To", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    q = forms.CharField(label="Search", required=False, max_length=200)

    def filters(self) -> dict:
        """The valid filters; an invalid one is left out (and shown beside its field)."""
        if not self.is_bound:
            return {}
        self.is_valid()
        return {k: v for k, v in self.cleaned_data.items() if v}
