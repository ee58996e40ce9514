"""The model's chat template, rendered with Jinja as transformers renders it, without
transformers.

Both tiers that turn messages into tokens without running the model (the web tier
counting tokens for admission, the CPU tier building prompts) render through this one
module, so they agree with each other; tests check that they also agree with
transformers' `apply_chat_template`, token for token. The environment is the one
transformers builds (`transformers.utils.chat_template_utils._compile_jinja_template`):
a sandbox, since a template is code that came with the model; `trim_blocks` and
`lstrip_blocks`; loop controls; its `tojson`, `raise_exception` and `strftime_now`; and
the `{% generation %}` tag (here it only renders its body: the assistant-token mask it
marks for training is of no use when serving).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Where a Hugging Face model directory keeps its template: a file of its own (written by
# transformers >= 4.47), else the "chat_template" entry of tokenizer_config.json.
TEMPLATE_FILE = "chat_template.jinja"
TOKENIZER_CONFIG = "tokenizer_config.json"
# A template list names its templates; the one used without tools is "default".
DEFAULT_TEMPLATE_NAME = "default"


class ChatTemplateError(ValueError):
    """The template could not be read or rendered (or raised an error of its own, as
    templates do for message orders they do not accept); the message says which."""


class _GenerationTag(Extension):
    """`{% generation %}...{% endgeneration %}`: renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller: Any) -> str:
        return caller()


def _raise_exception(message: str):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    # Jinja's own tojson escapes HTML characters, which would change what the model sees.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_GenerationTag, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


class ChatTemplate:
    """One compiled template and the special tokens it may refer to (`bos_token`,
    `eos_token`, ...: transformers passes the tokenizer's special tokens map)."""

    def __init__(self, source: str, *, special_tokens: Mapping[str, Any] | None = None):
        self.source = source
        self.special_tokens = dict(special_tokens or {})
        try:
            self._template = _environment().from_string(source)
        except jinja2.exceptions.TemplateError as exc:
            raise ChatTemplateError(f"the chat template does not compile: {exc}") from exc

    def __reduce__(self):
        # A compiled Jinja template neither pickles nor deep-copies: rebuild from source.
        return (_rebuild, (self.source, self.special_tokens))

    def render(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = False,
               tools: list[dict] | None = None, documents: list[dict] | None = None, **kwargs: Any) -> str:
        """The prompt text for `messages`, as `apply_chat_template(..., tokenize=False)`
        returns it. Keyword arguments overwrite special tokens of the same name, as there."""
        try:
            return self._template.render(messages=list(messages), tools=tools, documents=documents,
                                         add_generation_prompt=add_generation_prompt,
                                         **{**self.special_tokens, **kwargs})
        except jinja2.exceptions.TemplateError as exc:
            raise ChatTemplateError(f"the chat template failed on these messages: {exc}") from exc


def _rebuild(source: str, special_tokens: dict) -> ChatTemplate:
    return ChatTemplate(source, special_tokens=special_tokens)


def load_template_source(model_dir: str | Path) -> str | None:
    """The template text a model directory ships, or None when it has none (the prompt
    builder then uses its plain fallback format)."""
    model_dir = Path(model_dir)
    template_file = model_dir / TEMPLATE_FILE
    if template_file.is_file():
        return template_file.read_text(encoding="utf-8")
    config = read_tokenizer_config(model_dir)
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get(DEFAULT_TEMPLATE_NAME)
        if template is None:
            raise ChatTemplateError(
                f"{model_dir / TOKENIZER_CONFIG} names chat templates {sorted(map(str, named))} "
                f"but none {DEFAULT_TEMPLATE_NAME!r}")
    if template is not None and not isinstance(template, str):
        raise ChatTemplateError(f"{model_dir / TOKENIZER_CONFIG}: chat_template is a {type(template).__name__}")
    return template


def read_tokenizer_config(model_dir: str | Path) -> dict:
    path = Path(model_dir) / TOKENIZER_CONFIG
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ChatTemplateError(f"{path} is not readable JSON: {exc}") from exc
    return config if isinstance(config, dict) else {}
