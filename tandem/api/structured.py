"""`response_format` to the grammar the engine enforces (inference/engine/grammar.py).

The schema is checked here, at the door, with the library the engine uses (llguidance,
which needs neither torch nor the model), so a schema the engine could not enforce is a
400 `invalid_schema` before anything is stored or queued, never a failed reply. What
llguidance warns it would not enforce (an unsupported keyword) is refused too: a client
that asked for a constraint must not get output that was never held to it."""

from __future__ import annotations

import json
import re

from .errors import ApiError

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # OpenAI's rule for json_schema.name
JSON_SCHEMA_KEYS = {"name", "schema", "strict", "description"}
# json_object: any JSON object, as OpenAI's JSON mode promises.
ANY_OBJECT = {"type": "object"}
# At most one space wherever JSON allows whitespace: with llguidance's default (any run
# of whitespace) a small model can fill its whole budget with spaces and newlines
# between two tokens, valid JSON that never ends.
JSON_OPTIONS = {"whitespace_pattern": "[ ]?"}


def grammar_for_response_format(response_format: dict | None) -> str | None:
    """The llguidance grammar for a validated response_format, None for plain text."""
    if not response_format or response_format["type"] == "text":
        return None
    if response_format["type"] == "json_object":
        return grammar_for_schema(ANY_OBJECT, param="response_format")
    spec = response_format["json_schema"]
    return grammar_for_schema(spec.get("schema") or ANY_OBJECT, param="response_format.json_schema.schema")


def grammar_for_schema(schema: dict, *, param: str) -> str:
    import llguidance

    try:
        grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=JSON_OPTIONS)
        failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise invalid_schema(param, str(exc)) from None
    if failed or messages:
        raise invalid_schema(param, "; ".join(messages))
    return grammar


def invalid_schema(param: str, why: str) -> ApiError:
    return ApiError(400, f"Invalid schema for {param}: {why}", code="invalid_schema", param=param)
