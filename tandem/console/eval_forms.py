"""The forms of the assistant's draft, the trial chat and the evaluation harness: they
parse what a person typed and hand plain values to tandem.evals' services, whose
refusals (EvalInputError, DraftError) are put back beside their field."""

from __future__ import annotations

from django import forms

from knowledge.models import MAX_TOP_K, MODES, Article
from tenants.access import access_list

from .forms import Form

HANDOVER_CHOICES = [("", "Not checked"), ("yes", "Should hand over"), ("no", "Should not hand over")]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


class ArticleChoice(forms.ModelChoiceField):
    def label_from_instance(self, article: Article) -> str:
        return article.title


class CaseForm(Form):
    question = forms.CharField(label="Question", widget=forms.Textarea(attrs={"rows": 2}),
                               help_text="Asked as a visitor would ask it.")
    expect_article = ArticleChoice(label="Article to cite", queryset=Article.objects.none(), required=False,
                                   empty_label="Not checked",
                                   help_text="Checked: retrieval found it (hit) and the reply cites it first.")
    must_include = forms.CharField(label="Must include", required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                   help_text="Phrases the reply must contain, one a line (case-insensitive).")
    must_not_include = forms.CharField(label="Must not include", required=False,
                                       widget=forms.Textarea(attrs={"rows": 2}),
                                       help_text="Phrases it must not contain, one a line.")
    expect_handover = forms.ChoiceField(label="Hand-over", choices=HANDOVER_CHOICES, required=False,
                                        help_text="Whether the assistant should hand this to a person.")

    def __init__(self, *args, tenant, **kwargs):
        super().__init__(*args, **kwargs)
        # Not sliced: the field validates a choice with a query of its own on this queryset.
        self.fields["expect_article"].queryset = access_list(Article, tenant=tenant).defer("body", "text").order_by(
            "title")

    @classmethod
    def initial_for(cls, case) -> dict:
        return {"question": case.question, "expect_article": case.expect_article_id,
                "must_include": "\n".join(case.must_include), "must_not_include": "\n".join(case.must_not_include),
                "expect_handover": {True: "yes", False: "no"}.get(case.expect_handover, "")}

    def values(self) -> dict:
        d = self.cleaned_data
        return {"question": d["question"], "expect_article": d["expect_article"],
                "must_include": _lines(d["must_include"]), "must_not_include": _lines(d["must_not_include"]),
                "expect_handover": {"yes": True, "no": False}.get(d["expect_handover"])}


class DraftForm(Form):
    system_prompt = forms.CharField(label="System prompt", required=False, widget=forms.Textarea(attrs={"rows": 5}),
                                    help_text="The persona: the first message of every prompt.")
    knowledge_enabled = forms.BooleanField(label="Retrieval on", required=False,
                                           help_text="Ground replies in the tenant's articles.")
    top_k = forms.IntegerField(label="Passages per message (k)", min_value=1, max_value=MAX_TOP_K)
    min_score = forms.FloatField(label="Minimum score", min_value=0.0, max_value=1.0,
                                 widget=forms.NumberInput(attrs={"step": "0.05"}),
                                 help_text="0 to 1: passages scoring below it are left out.")
    mode = forms.ChoiceField(label="Retrieval mode", choices=[(m, m) for m in MODES])
    temperature = forms.FloatField(label="Temperature", required=False, min_value=0.0, max_value=2.0,
                                   widget=forms.NumberInput(attrs={"step": "0.1"}),
                                   help_text="Blank: the platform's default (0, the same answer each time).")
    frequency_penalty = forms.FloatField(label="Frequency penalty", required=False, min_value=-2.0, max_value=2.0,
                                         widget=forms.NumberInput(attrs={"step": "0.1"}),
                                         help_text="Against loops; published to the repetition control. "
                                                   "Blank: the tenant's repetition control as it is.")
    max_tokens = forms.IntegerField(label="Max reply tokens", required=False, min_value=1,
                                    help_text="Blank: the tenant's maximum output tokens.")


class TryForm(Form):
    question = forms.CharField(label="Message", widget=forms.Textarea(attrs={"rows": 2}))
    settings = forms.ChoiceField(label="Settings", choices=[("draft", "Draft"), ("live", "Live")],
                                 widget=forms.RadioSelect)
    conversation = forms.UUIDField(required=False, widget=forms.HiddenInput)
