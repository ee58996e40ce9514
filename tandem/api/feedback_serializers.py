"""Schemas of the feedback endpoints (tandem.api.feedback_views). Validation of the
values is the feedback services' (one set of rules for the socket and REST); these
describe the shapes for the OpenAPI document and name the accepted fields."""

from __future__ import annotations

from rest_framework import serializers


class FeedbackRequestSerializer(serializers.Serializer):
    rating = serializers.ChoiceField(choices=["up", "down"])
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class FeedbackSerializer(serializers.Serializer):
    object = serializers.CharField(default="feedback")
    message = serializers.UUIDField()
    conversation = serializers.UUIDField()
    rating = serializers.CharField()
    comment = serializers.CharField(allow_blank=True)
    updated_at = serializers.DateTimeField()


class CsatRequestSerializer(serializers.Serializer):
    score = serializers.IntegerField(min_value=1, max_value=5)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class CsatSerializer(serializers.Serializer):
    object = serializers.CharField(default="csat")
    conversation = serializers.UUIDField()
    score = serializers.IntegerField()
    comment = serializers.CharField(allow_blank=True)
    answered_by = serializers.CharField()
    created_at = serializers.DateTimeField()
