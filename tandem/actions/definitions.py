"""Checking what an admin defines: every field is validated here, and a value that
cannot be used raises ActionInputError naming the field (the console shows it beside
that field). The URL template's host is the admin's alone: placeholders may only fill
the path and query, and every value is URL-encoded when the call is made (outbound.py)."""

from __future__ import annotations

import ipaddress
import json
import re
import string
from urllib.parse import urlsplit

import jsonschema

from knowledge.outbound import address_refusal, allowed_hosts
from tandem.api import tool_calls
from tandem.api.errors import ApiError
from tandem.webhooks.sending import url_refusal

from . import conf
from .models import Action

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
# Headers the platform writes itself, or that would change how the request is framed.
RESERVED_HEADERS = {"host", "content-length", "content-type", "transfer-encoding", "connection", "user-agent",
                    "tandem-user", "tandem-user-verified", "tandem-signature", "tandem-action", "tandem-call-id"}
MAX_HEADERS = 20
MAX_PHRASES = 20


class ActionInputError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def clean_name(name) -> str:
    if not isinstance(name, str) or not NAME.match(name.strip()):
        raise ActionInputError("name", "A name is letters, digits and underscores (at most 64), not starting "
                                       "with a digit: the assistant calls the action by it.")
    return name.strip()


def clean_text(field: str, value, *, max_chars: int, required: bool = False) -> str:
    if not isinstance(value, str) or len(value) > max_chars or "\x00" in value:
        raise ActionInputError(field, f"Text of at most {max_chars} characters.")
    value = value.strip()
    if required and not value:
        raise ActionInputError(field, "This field is required.")
    return value


def clean_parameters(parameters) -> dict:
    """A JSON schema of an object, that jsonschema accepts and the engine's grammar can
    enforce (llguidance, as the REST API's tools are checked)."""
    if isinstance(parameters, str):
        try:
            parameters = json.loads(parameters or "{}")
        except ValueError as exc:
            raise ActionInputError("parameters", f"Not valid JSON: {exc}.") from None
    if not isinstance(parameters, dict):
        raise ActionInputError("parameters", "The parameters are a JSON schema object.")
    parameters = parameters or {"type": "object", "properties": {}}
    if parameters.get("type") != "object":
        raise ActionInputError("parameters", 'The schema\'s "type" must be "object" (the arguments are an object).')
    try:
        jsonschema.Draft202012Validator.check_schema(parameters)
    except jsonschema.SchemaError as exc:
        raise ActionInputError("parameters", f"Not a valid JSON schema: {exc.message}.") from None
    if _uses(parameters, ("pattern", "patternProperties", "$ref", "$dynamicRef")):
        # A tenant's regular expression would be run by Python's backtracking engine when
        # the arguments are checked: unbounded in time. References could reach out.
        raise ActionInputError("parameters", "pattern, patternProperties and $ref are not allowed here.")
    if len(json.dumps(parameters)) > 8000:
        raise ActionInputError("parameters", "The schema is longer than 8000 characters.")
    try:
        tool_calls.grammar({"tools": [{"type": "function", "function": {"name": "f", "parameters": parameters}}],
                            "tool_choice": "required"})
    except ApiError as exc:
        raise ActionInputError("parameters", f"The assistant cannot be held to this schema: {exc.message}") from None
    return parameters


def _uses(schema, keys: tuple[str, ...]) -> bool:
    if isinstance(schema, dict):
        return any(k in schema for k in keys) or any(_uses(v, keys) for v in schema.values())
    if isinstance(schema, list):
        return any(_uses(v, keys) for v in schema)
    return False


def placeholders(template: str) -> list[str]:
    """The {names} of a URL template (a malformed brace raises ValueError)."""
    return [name for _, name, spec, conv in string.Formatter().parse(template) if name is not None]


def clean_url_template(template, parameters: dict) -> str:
    if not isinstance(template, str) or not template.strip() or len(template) > 2000:
        raise ActionInputError("url_template", "A URL of at most 2000 characters is required.")
    template = template.strip()
    try:
        names = placeholders(template)
    except ValueError:
        raise ActionInputError("url_template", "Braces are only for {placeholders}.") from None
    declared = set((parameters.get("properties") or {}).keys())
    for name in names:
        if not NAME.match(name):
            raise ActionInputError("url_template", f"{{{name}}} is not a parameter's name.")
        if name not in declared:
            raise ActionInputError("url_template", f"{{{name}}} is not one of the parameters' properties.")
    scheme, sep, rest = template.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if not sep or "{" in scheme or "{" in authority:
        raise ActionInputError("url_template", "The scheme and host are fixed: placeholders go in the path or query.")
    if "#" in template:
        raise ActionInputError("url_template", "The URL has no #fragment.")
    sample = template.format(**{n: "x" for n in names})
    why = url_refusal(sample)
    if why:
        raise ActionInputError("url_template", why)
    host = (urlsplit(sample).hostname or "").lower()
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return template  # a name: resolved and checked before each call
    why = address_refusal(host)
    if why and host not in allowed_hosts():
        raise ActionInputError("url_template", f"{host} is a {why} address: actions reach public addresses only.")
    return template


def _header_name(field: str, name) -> str:
    if not isinstance(name, str) or not HEADER_NAME.match(name.strip()):
        raise ActionInputError(field, "A header name is letters, digits and - (at most 100).")
    if name.strip().lower() in RESERVED_HEADERS:
        raise ActionInputError(field, f"{name.strip()} is written by Tandem itself.")
    return name.strip()


def _header_value(field: str, value, *, max_chars: int) -> str:
    if not isinstance(value, str) or len(value) > max_chars or any(c in value for c in "\r\n\x00"):
        raise ActionInputError(field, f"A header value is one line of at most {max_chars} characters.")
    return value.strip()


def clean_headers(headers) -> dict[str, str]:
    """{name: value}, from a dict or from "Name: value" lines."""
    if isinstance(headers, str):
        pairs = []
        for line in headers.splitlines():
            if line.strip():
                name, colon, value = line.partition(":")
                if not colon:
                    raise ActionInputError("headers", f"{line.strip()[:40]!r} is not 'Name: value'.")
                pairs.append((name, value))
        headers = pairs
    elif isinstance(headers, dict):
        headers = list(headers.items())
    else:
        raise ActionInputError("headers", "Headers are 'Name: value' lines.")
    if len(headers) > MAX_HEADERS:
        raise ActionInputError("headers", f"At most {MAX_HEADERS} headers.")
    cleaned = {_header_name("headers", n): _header_value("headers", v, max_chars=1000) for n, v in headers}
    if len({n.lower() for n in cleaned}) != len(cleaned):
        raise ActionInputError("headers", "A header is named twice.")
    return cleaned


def clean_secret_header(name, value, *, has_value: bool) -> tuple[str, str | None]:
    """(name, value or None to keep the stored one). A name without a value (none
    stored) is refused; no name clears it."""
    name = (name or "").strip() if isinstance(name, str) else name
    if not name:
        return "", ""
    name = _header_name("secret_header_name", name)
    value = _header_value("secret_header_value", value or "", max_chars=4000)
    if not value and not has_value:
        raise ActionInputError("secret_header_value", "Give the secret header's value.")
    return name, value or None


def clean_timeout(timeout_s) -> float:
    try:
        timeout_s = float(timeout_s)
    except (TypeError, ValueError):
        raise ActionInputError("timeout_s", "The timeout is a number of seconds.") from None
    top = conf.max_timeout_s()
    if not 0.5 <= timeout_s <= top:
        raise ActionInputError("timeout_s", f"The timeout is between 0.5 and {top:g} seconds.")
    return timeout_s


def clean_choice(field: str, value, choices) -> str:
    if value not in {c for c, _ in choices}:
        raise ActionInputError(field, f"Choose one of: {', '.join(c for c, _ in choices)}.")
    return value


def clean_phrases(phrases) -> str:
    phrases = clean_text("trigger_phrases", phrases or "", max_chars=2000)
    lines = [p.strip() for p in phrases.splitlines() if p.strip()]
    if len(lines) > MAX_PHRASES or any(len(p) > 100 for p in lines):
        raise ActionInputError("trigger_phrases", f"At most {MAX_PHRASES} phrases of at most 100 characters.")
    return "\n".join(lines)


def clean_method(method) -> str:
    return clean_choice("method", method, Action.Method.choices)
