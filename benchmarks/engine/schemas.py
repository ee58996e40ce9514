"""Ten JSON schemas of the kinds support integrations send (a ticket, a classification, a
refund, an address...), each bounded (strings with maxLength, integers with a range,
arrays with maxItems, no free numbers), so that any model, even the tiny random one,
completes a reply inside 256 tokens: a strict reply then always parses and validates,
and a failure means the grammar let something through. Compiled as the web tier
compiles a response_format (tandem.api.structured: at most one space between tokens)."""

from __future__ import annotations

import json

WHITESPACE = {"whitespace_pattern": "[ ]?"}


def _obj(props: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": props, "required": required or list(props),
            "additionalProperties": False}


def _s(n: int, **kw) -> dict:
    return {"type": "string", "maxLength": n, **kw}


SCHEMAS: list[dict] = [
    _obj({"category": {"enum": ["billing", "login", "shipping", "other"]}, "urgent": {"type": "boolean"},
          "summary": _s(30)}),
    _obj({"sentiment": {"enum": ["positive", "neutral", "negative"]}, "score": {"type": "integer", "minimum": 1,
                                                                               "maximum": 5}}),
    _obj({"order_id": _s(12, pattern="^[A-Z0-9-]*$"), "refund": {"type": "boolean"},
          "amount_cents": {"type": "integer", "minimum": 0, "maximum": 100000}}),
    _obj({"street": _s(24), "city": _s(16), "country": {"enum": ["FR", "DE", "US", "GB", "ES"]}}),
    _obj({"tags": {"type": "array", "items": {"enum": ["refund", "bug", "howto", "account", "spam"]},
                   "maxItems": 3}}),
    _obj({"answer": _s(40), "sources": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99},
                                        "maxItems": 3}}),
    _obj({"handover": {"type": "boolean"}, "reason": {"anyOf": [_s(20), {"type": "null"}]}}),
    _obj({"steps": {"type": "array", "items": _s(20), "minItems": 1, "maxItems": 3}}),
    _obj({"customer": _obj({"name": _s(16), "vip": {"type": "boolean"}}), "priority": {"enum": ["low", "high"]}}),
    _obj({"language": {"enum": ["en", "fr", "de"]}, "reply": _s(30), "confidence": {"type": "integer",
                                                                                   "minimum": 0, "maximum": 100}}),
]


def compile_schema(schema: dict) -> str:
    """The llguidance grammar of a schema, as tandem.api.structured makes it."""
    import llguidance

    return llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=WHITESPACE)
