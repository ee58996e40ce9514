"""Every field of OpenAI's chat-completions request, and what Tandem does with it.

DRF drops fields a serializer does not declare, so a request with `tools` or
`response_format` used to get free prose with a 200, and the client could not tell its
request was not honoured. This table is checked before the serializer: a field is either
honoured (declared in ChatCompletionRequestSerializer), accepted only at values that
mean "off" (`store: false`), or refused with a 400 naming it
(`unsupported_parameter`); a field OpenAI does not define is `unknown_parameter`. The
same holds inside each message. docs/api.md lists the table in words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import ApiError


def _off(*values) -> Callable[[Any], bool]:
    return lambda v: v is None or v in values


# Honoured: the serializer validates and the pipeline applies them.
HONOURED = frozenset({
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stop",
    "stream", "stream_options", "user", "n", "frequency_penalty", "presence_penalty", "logit_bias",
    "response_format", "tools", "tool_choice", "parallel_tool_calls", "logprobs", "top_logprobs",
    "safety_identifier",  # OpenAI's newer `user`: the visitor id when `user` is absent
    # Extensions vLLM spells the same way (docs/api.md).
    "top_k", "repetition_penalty",
})

# OpenAI's fields that are accepted only where they ask for nothing Tandem lacks.
ACCEPTED_WHEN: dict[str, Callable[[Any], bool]] = {
    "store": _off(False),  # OpenAI's stored completions; Tandem keeps its own transcript regardless
    "metadata": lambda v: v is None or v == {},  # tags for stored completions
    "modalities": lambda v: v is None or v == ["text"],
    "service_tier": _off("auto", "default"),  # one tier: every request gets it
}

# OpenAI's fields Tandem does not honour: any value other than null is refused.
REFUSED = frozenset({
    "audio", "function_call", "functions", "prediction", "prompt_cache_key", "prompt_cache_retention",
    "reasoning_effort", "verbosity", "web_search_options",
})

# Per message: the fields OpenAI defines for any role, and what each role may carry.
MESSAGE_FIELDS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio",
                            "function_call", "annotations"})
# Fields a client echoes back from a completion's message (the official client's
# model_dump) that are fine while empty.
MESSAGE_EMPTY_OK = frozenset({"refusal", "audio", "function_call", "annotations"})
STREAM_OPTIONS = {"include_usage": lambda v: v is None or isinstance(v, bool),
                  "include_obfuscation": _off(False)}


def refuse_unhonoured(data: dict) -> None:
    """Raise a 400 for the first field of the request (or of one of its messages) that
    Tandem would otherwise have to drop."""
    for key, value in data.items():
        if key in HONOURED:
            continue
        if key in ACCEPTED_WHEN:
            if not ACCEPTED_WHEN[key](value):
                raise unsupported(key, f"'{key}' is supported only when off or at its default; got {value!r}.")
            continue
        if key in REFUSED:
            if value is not None:
                raise unsupported(key, f"'{key}' is not supported by this deployment.")
            continue
        raise ApiError(400, f"Unrecognized request argument supplied: {key}", code="unknown_parameter", param=key)
    options = data.get("stream_options")
    if isinstance(options, dict):
        for key, value in options.items():
            param = f"stream_options.{key}"
            if key not in STREAM_OPTIONS:
                raise ApiError(400, f"Unrecognized request argument supplied: {param}", code="unknown_parameter",
                               param=param)
            if not STREAM_OPTIONS[key](value):
                raise unsupported(param, f"'{param}' is not supported by this deployment; got {value!r}.")
    messages = data.get("messages")
    if isinstance(messages, list):
        for i, m in enumerate(messages):
            if isinstance(m, dict):
                _check_message(i, m)


def _check_message(i: int, m: dict) -> None:
    for key, value in m.items():
        param = f"messages[{i}].{key}"
        if key not in MESSAGE_FIELDS:
            raise ApiError(400, f"Unrecognized message field: {param}", code="unknown_parameter", param=param)
        if key in MESSAGE_EMPTY_OK and value not in (None, [], ""):
            raise unsupported(param, f"'{param}' is not supported by this deployment.")


def unsupported(param: str, message: str) -> ApiError:
    return ApiError(400, message, code="unsupported_parameter", param=param)


def refuse_unknown(data: dict, serializer_class) -> None:
    """For Tandem's own endpoints: a field the serializer does not declare is a 400."""
    declared = serializer_class().fields
    for key in data:
        if key not in declared:
            raise ApiError(400, f"Unrecognized request argument supplied: {key}", code="unknown_parameter",
                           param=key)
