"""Request and response shapes of the evaluation endpoints (docs/api.md, docs/evals.md):
the schema's; values are checked by `tandem.evals.services`, which names the field it
refuses."""

from __future__ import annotations

from rest_framework import serializers

from tandem.evals.models import EvalCase, EvalResult, EvalRun


def _iso(value):
    return value.isoformat() if value else None


def case_data(c: EvalCase) -> dict:
    return {"id": c.pk, "object": "eval.case", "question": c.question,
            "expect_article": str(c.expect_article_id) if c.expect_article_id else None,
            "must_include": list(c.must_include), "must_not_include": list(c.must_not_include),
            "expect_handover": c.expect_handover, "created_at": _iso(c.created_at)}


def result_data(r: EvalResult) -> dict:
    return {"case": r.case_id, "question": r.question, "message_id": str(r.message_id) if r.message_id else None,
            "status": r.status, "passed": r.passed, "checks": r.checks, "reply": r.reply, "sources": r.sources,
            "completion_tokens": r.completion_tokens, "repetition": r.repetition, "latency_ms": r.latency_ms}


def run_data(run: EvalRun, *, results: bool = True) -> dict:
    data = {"id": run.pk, "object": "eval.run", "settings": run.settings, "status": run.status,
            "error": run.error or None, "total": run.total, "done": run.done, "started_at": _iso(run.started_at),
            "finished_at": _iso(run.finished_at), "summary": run.summary or None}
    if results:
        data["results"] = [result_data(r) for r in run.results.all()]
    return data


class CaseCreateSerializer(serializers.Serializer):
    question = serializers.CharField(help_text="asked as a visitor would ask it")
    expect_article = serializers.UUIDField(required=False, allow_null=True,
                                           help_text="the article the reply should cite (checked: retrieval hit, "
                                                     "cited first)")
    must_include = serializers.ListField(child=serializers.CharField(), required=False, max_length=20)
    must_not_include = serializers.ListField(child=serializers.CharField(), required=False, max_length=20)
    expect_handover = serializers.BooleanField(required=False, allow_null=True,
                                               help_text="whether it should hand over; null: not checked")


class CaseUpdateSerializer(CaseCreateSerializer):
    question = serializers.CharField(required=False)


class CaseSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    object = serializers.CharField()
    question = serializers.CharField()
    expect_article = serializers.UUIDField(allow_null=True)
    must_include = serializers.ListField(child=serializers.CharField())
    must_not_include = serializers.ListField(child=serializers.CharField())
    expect_handover = serializers.BooleanField(allow_null=True)
    created_at = serializers.DateTimeField()


class CaseListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = CaseSerializer(many=True)


class RunCreateSerializer(serializers.Serializer):
    settings = serializers.ChoiceField(choices=EvalRun.Settings.values, required=False, default="live",
                                       help_text="the live settings, or the tenant's draft of them")
    draft = serializers.UUIDField(required=False, help_text="with settings 'draft': the draft's id (the tenant's "
                                                            "one draft when left out); read on the server")


class ResultSerializer(serializers.Serializer):
    case = serializers.IntegerField(allow_null=True)
    question = serializers.CharField()
    message_id = serializers.UUIDField(allow_null=True)
    status = serializers.CharField(help_text="the reply's: done, failed, timeout, refused")
    passed = serializers.BooleanField()
    checks = serializers.DictField(child=serializers.BooleanField(),
                                   help_text="{check: passed}: answered, retrieval_hit, citation_first, "
                                             "includes: <phrase>, excludes: <phrase>, handover")
    reply = serializers.CharField()
    sources = serializers.ListField(child=serializers.DictField())
    completion_tokens = serializers.IntegerField()
    repetition = serializers.FloatField()
    latency_ms = serializers.FloatField(allow_null=True)


class RunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    object = serializers.CharField()
    settings = serializers.CharField()
    status = serializers.ChoiceField(choices=EvalRun.Status.values)
    error = serializers.CharField(allow_null=True)
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    summary = serializers.DictField(allow_null=True, help_text="once finished: cases, passed, checks "
                                    "{check: [passed, of]}, mean_repetition, mean_completion_tokens, "
                                    "mean_latency_ms, median_latency_ms")
    results = ResultSerializer(many=True, required=False)


class RunListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = RunSerializer(many=True)
