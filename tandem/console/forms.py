"""The console's forms: they parse and check what a person typed (types, ranges,
required fields) and hand plain values to the services, which hold the rules. A
service's ValidationError is put back on the form (`apply_errors`), so every refusal
is shown beside its field, never as a 500."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from inference.text import handover
from knowledge.models import MAX_TOP_K
from tandem.chat.models import Conversation
from tandem.handoff import phrases as handoff_phrases
from tenants.models import ApiKey, ComputePool, Membership, Tenant
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
    """The assistant page's form, in fieldsets (`FIELDSETS`): the persona, the widget's
    appearance and texts, identity verification and the hand-over. Its field names are
    the tenant's (`tenants.services.ASSISTANT_FIELDS`)."""

    system_prompt = forms.CharField(
        label="System prompt", required=False, max_length=8000, widget=forms.Textarea(attrs={"rows": 8}),
        help_text="The support persona: always the first message of every prompt.")
    widget_title = forms.CharField(label="Title", required=False, max_length=80,
                                   help_text="The panel's header; the tenant's name when blank.")
    widget_color = forms.RegexField(
        label="Colour", regex=r"^#[0-9a-fA-F]{6}$", max_length=7, widget=forms.TextInput(attrs={"type": "color"}),
        error_messages={"invalid": "Enter a colour as #rrggbb, e.g. #2f5bd3."},
        help_text="Header, launcher and the visitor's messages; the text on it is black or white, "
                  "whichever contrasts more.")
    widget_greeting = forms.CharField(label="Greeting", required=False, max_length=500,
                                      widget=forms.Textarea(attrs={"rows": 2}),
                                      help_text="The first message a visitor sees (Markdown); a default when blank.")
    widget_placeholder = forms.CharField(label="Placeholder", required=False, max_length=100,
                                         help_text="The message box's placeholder; a default when blank.")
    widget_position = forms.ChoiceField(label="Position", choices=Tenant.WidgetPosition.choices)
    widget_locale = forms.ChoiceField(label="Language", required=False,
                                      choices=Tenant.WidgetLocale.choices,
                                      help_text="The widget's own strings; a page may override it.")
    identity_verification = forms.BooleanField(
        label="Identity verification", required=False,
        help_text="Visitors the site identifies (Tandem.identify) must prove it with "
                  "HMAC-SHA256(identity secret, user id). Turning it on makes a secret if there is none.")
    handover_builtin = forms.BooleanField(
        label="Built-in phrases", required=False,
        help_text="Recognise the built-in English and French ways of asking for a person (listed below).")
    handover_phrases = forms.CharField(
        label="Hand-over phrases", required=False, max_length=30_000, widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Your own, one a line, in plain words: e.g. \"speak to a manager\". A message holding one "
                  "(any case, whole words) is handed to a person.")
    handover_patterns = forms.CharField(
        label="Regular expressions", required=False, max_length=30_000, widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One RE2 expression a line, case-insensitive (no look-arounds or back-references).")
    handover_text = forms.CharField(label="Hand-over message", required=False, max_length=300,
                                    help_text="What the assistant says when it hands over; a default when blank.")
    handover_round_robin = forms.BooleanField(
        label="Assign round-robin", required=False,
        help_text="A conversation handed over goes straight to the online agent who was assigned one "
                  "least recently; with no agent online it waits in the inbox (and the widget offers "
                  "to leave a message).")
    handover_ungrounded = forms.BooleanField(
        label="Hand over when the knowledge has no answer", required=False,
        help_text="Instead of answering, hand over when retrieval finds no passage above the knowledge "
                  "settings' minimum score (needs knowledge on).")

    FIELDSETS = [
        ("Persona", ["system_prompt"]),
        ("Widget appearance", ["widget_title", "widget_color", "widget_position", "widget_locale"]),
        ("Widget texts", ["widget_greeting", "widget_placeholder"]),
        ("Identity verification", ["identity_verification"]),
        # The expressions field is shown apart, behind "Advanced" (templates/console/assistant.html).
        ("When a visitor asks for a person", ["handover_builtin", "handover_phrases"]),
        ("Hand-over to a person", ["handover_text", "handover_round_robin", "handover_ungrounded"]),
    ]
    PREVIEW_FIELDS = ("widget_title", "widget_color", "widget_greeting", "widget_placeholder",
                      "widget_position", "widget_locale")

    def clean_widget_color(self):
        return self.cleaned_data["widget_color"].lower()

    def clean_handover_phrases(self):
        phrases = handoff_phrases.lines_of(self.cleaned_data["handover_phrases"])
        for n, phrase in enumerate(phrases, 1):
            if len(phrase) < handoff_phrases.MIN_PHRASE_CHARS:
                raise forms.ValidationError(f"Line {n}: a phrase has at least {handoff_phrases.MIN_PHRASE_CHARS} "
                                            "characters.")
            if len(handoff_phrases.phrase_pattern(phrase)) > handover.MAX_PATTERN_CHARS:
                raise forms.ValidationError(f"Line {n} is too long.")
        return phrases

    def clean_handover_patterns(self):
        # Checked on their own, so that an error's line number is the field's.
        lines = [line.strip() for line in self.cleaned_data["handover_patterns"].splitlines()
                 if line.strip() and line.strip() != handover.OFF]
        try:
            handover.parse("\n".join(lines) or handover.OFF)
        except handover.BadPattern as exc:
            raise forms.ValidationError(str(exc)) from None
        return lines

    def clean(self):
        """The three hand-over fields become the one stored text (`handover_patterns`)."""
        data = super().clean()
        if {"handover_phrases", "handover_patterns"} <= data.keys():
            stored = handoff_phrases.write(handoff_phrases.Phrases(
                builtin=bool(data.pop("handover_builtin", False)), phrases=data.pop("handover_phrases"),
                expressions=data["handover_patterns"]))
            try:
                handover.parse(stored)
            except handover.BadPattern as exc:
                self.add_error("handover_phrases", str(exc))
            data["handover_patterns"] = stored
        return data

    def handover_advanced(self):
        return [self["handover_patterns"]]

    def fieldsets(self):
        return [(title, [self[name] for name in names]) for title, names in self.FIELDSETS]

    @classmethod
    def initial_for(cls, tenant: Tenant) -> dict:
        phrases = handoff_phrases.read(tenant.handover_patterns)
        return {**{name: getattr(tenant, name) for name in cls.base_fields if hasattr(tenant, name)},
                "handover_builtin": phrases.builtin, "handover_phrases": "\n".join(phrases.phrases),
                "handover_patterns": "\n".join(phrases.expressions)}


class ArticleForm(Form):
    title = forms.CharField(label="Title", max_length=300)
    url = forms.CharField(label="URL", required=False, max_length=1000,
                          help_text="Where the article is on the tenant's site: replies link to it.")
    tags = forms.CharField(label="Tags", required=False, max_length=1100,
                           help_text="Comma-separated, e.g. billing, refunds")
    body = forms.CharField(label="Body", max_length=200_000, widget=forms.Textarea(attrs={"rows": 14}),
                           help_text="Markdown.")

    def clean_tags(self):
        return [t.strip() for t in self.cleaned_data["tags"].split(",") if t.strip()]

    @staticmethod
    def initial_for(article) -> dict:
        return {"title": article.title, "url": article.url, "tags": ", ".join(article.tags), "body": article.body}


class ArticleImportForm(Form):
    file = forms.FileField(label="File", help_text="A .jsonl file (one article a line) or a .zip of .md, .txt "
                                                   "and .html files; an article with the same source is updated.")


class KnowledgeSettingsForm(Form):
    enabled = forms.BooleanField(label="Retrieval on", required=False,
                                 help_text="Ground replies in the tenant's articles.")
    top_k = forms.IntegerField(label="Passages per message (k)", min_value=1, max_value=MAX_TOP_K,
                               help_text=f"1 to {MAX_TOP_K}; those that fit the prompt are kept.")
    min_score = forms.FloatField(label="Minimum score", min_value=0.0, max_value=1.0,
                                 widget=forms.NumberInput(attrs={"step": "0.05"}),
                                 help_text="0 to 1: passages scoring below it are left out.")


class MemberInviteForm(Form):
    user = forms.CharField(label="Username or e-mail", max_length=254,
                           help_text="They accept from their own console, or through the link (e-mailed to an "
                                     "address); a new person sets a password there.")
    role = forms.ChoiceField(label="Role", choices=Membership.Role.choices, initial=Membership.Role.VIEWER)


class InvitationSignUpForm(Form):
    """A new person's account, made where they accept an invitation's link."""

    username = forms.CharField(label="Username", max_length=150,
                               help_text="Letters, digits and @ . + - _ only.")
    password1 = forms.CharField(label="Password", strip=False, widget=forms.PasswordInput(
        attrs={"autocomplete": "new-password"}))
    password2 = forms.CharField(label="Password again", strip=False, widget=forms.PasswordInput(
        attrs={"autocomplete": "new-password"}))

    def clean(self):
        data = super().clean()
        if data.get("password1") and data.get("password2") and data["password1"] != data["password2"]:
            self.add_error("password2", "The two passwords differ.")
        return data


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
