"""The served model's tokenizer, for the tiers that count tokens without running the
model: the web tier (quota admission) and the CPU tier (building prompts). Loaded once
per process; no weights, and no torch or transformers: the Rust `tokenizers` library
reads the model's tokenizer.json and `chat_template` renders its chat template, so a
web process stays tens of MB and starts in well under a second.

`ServedTokenizer` answers the part of transformers' tokenizer interface that the prompt
builder and the token counts use (`encode`, calling it, `apply_chat_template`,
`decode`), with the same results (tests/inference/text/test_lean_tokenizer.py compares
them with transformers on the default model), so `build_prompt` takes either.
"""

from __future__ import annotations

import ctypes
import json
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings

from ..engine.model_dir import resolve_model_dir
from .chat_template import (
    ChatTemplate,
    ChatTemplateError,
    load_template_source,
    read_tokenizer_config,
)

# Tokenizing a message alone can merge differently at its edges than inside the
# template; one token per message covers it, so the estimate stays an upper bound.
EDGE_MARGIN_PER_MESSAGE = 1

TOKENIZER_FILE = "tokenizer.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
# The special tokens transformers passes to a chat template (its SPECIAL_TOKENS_ATTRIBUTES).
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                       "mask_token", "additional_special_tokens")
# What transformers' `clean_up_tokenization` undoes when a tokenizer asks for it on decode.
_CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
             (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


class ServedTokenizer:
    """A model directory's fast tokenizer (tokenizer.json) and chat template."""

    def __init__(self, tokenizer: Any, *, chat_template: str | None, special_tokens: Mapping[str, Any],
                 clean_up_tokenization_spaces: bool = False):
        self._tokenizer = tokenizer  # a tokenizers.Tokenizer
        self.special_tokens = dict(special_tokens)
        self.chat_template = chat_template
        self.clean_up_tokenization_spaces = clean_up_tokenization_spaces

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> ServedTokenizer:
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        path = model_dir / TOKENIZER_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} does not exist: the web and CPU tiers need the model's fast tokenizer "
                "(saving the tokenizer once with transformers writes it; `make model` does)")
        tokenizer = Tokenizer.from_file(str(path))
        # transformers turns these off unless a call asks for them; a file may carry them.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        config = read_tokenizer_config(model_dir)
        return cls(tokenizer, chat_template=load_template_source(model_dir),
                   special_tokens=_special_tokens(model_dir, config),
                   clean_up_tokenization_spaces=bool(config.get("clean_up_tokenization_spaces", False)))

    @property
    def chat_template(self) -> str | None:
        """The template's source; None for a tokenizer without one (set it to change it,
        as on a transformers tokenizer)."""
        return self._template.source if self._template else None

    @chat_template.setter
    def chat_template(self, source: str | None) -> None:
        self._template = ChatTemplate(source, special_tokens=self.special_tokens) if source else None

    @property
    def bos_token(self) -> str | None:
        return self.special_tokens.get("bos_token")

    @property
    def eos_token(self) -> str | None:
        return self.special_tokens.get("eos_token")

    @property
    def bos_token_id(self) -> int | None:
        return self._special_id("bos_token")

    @property
    def eos_token_id(self) -> int | None:
        return self._special_id("eos_token")

    def _special_id(self, name: str) -> int | None:
        token = self.special_tokens.get(name)
        return self._tokenizer.token_to_id(token) if isinstance(token, str) else None

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def __call__(self, text: str | Sequence[str], add_special_tokens: bool = True,
                 return_offsets_mapping: bool = False) -> dict[str, list]:
        """{"input_ids": ..., "offset_mapping": ... (when asked)}: one list for a string,
        a list of lists for a list of strings, as transformers answers."""
        if isinstance(text, str):
            encoding = self._tokenizer.encode(text, add_special_tokens=add_special_tokens)
            out = {"input_ids": encoding.ids}
            if return_offsets_mapping:
                out["offset_mapping"] = encoding.offsets
            return out
        encodings = self._tokenizer.encode_batch(list(text), add_special_tokens=add_special_tokens)
        out = {"input_ids": [e.ids for e in encodings]}
        if return_offsets_mapping:
            out["offset_mapping"] = [e.offsets for e in encodings]
        return out

    def apply_chat_template(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = False,
                            tokenize: bool = True, **kwargs: Any) -> str | list[int]:
        """The rendered prompt (`tokenize=False`) or its ids, with no special tokens added
        beyond those the template writes, as transformers does."""
        if self._template is None:
            raise ChatTemplateError("this model's tokenizer has no chat template")
        text = self._template.render(messages, add_generation_prompt=add_generation_prompt, **kwargs)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None) -> str:
        text = self._tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)
        clean = self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None else clean_up_tokenization_spaces
        if clean:
            for before, after in _CLEAN_UP:
                text = text.replace(before, after)
        return text


def _special_tokens(model_dir: Path, config: dict) -> dict[str, Any]:
    """The special tokens by name, as strings: tokenizer_config.json's, overridden by
    special_tokens_map.json's where it has them (transformers' order)."""
    found = {name: config[name] for name in SPECIAL_TOKEN_NAMES if config.get(name) is not None}
    path = model_dir / SPECIAL_TOKENS_FILE
    if path.is_file():
        try:
            extra = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ChatTemplateError(f"{path} is not readable JSON: {exc}") from exc
        for name in SPECIAL_TOKEN_NAMES:
            if extra.get(name) is None:
                continue
            if name == "additional_special_tokens":
                merged = list(found.get(name) or [])
                merged += [t for t in extra[name] if t not in merged]
                found[name] = merged
            else:
                found[name] = extra[name]

    def text(token: Any) -> str:
        return token["content"] if isinstance(token, dict) else str(token)

    # Only the tokens that are set, as transformers' special_tokens_map lists them.
    return {name: [text(t) for t in value] if isinstance(value, list) else text(value)
            for name, value in found.items() if value}


_lock = threading.Lock()
_tokenizer: ServedTokenizer | None = None


def get_tokenizer() -> ServedTokenizer:
    # A lock, not functools.cache: the first call reads files that concurrent first calls
    # from several threads would each read again.
    global _tokenizer
    if _tokenizer is None:
        with _lock:
            if _tokenizer is None:
                _tokenizer = ServedTokenizer.from_dir(resolve_model_dir(settings.TANDEM_MODEL))
                _release_freed_heap()
    return _tokenizer


def _release_freed_heap() -> None:
    """Parsing tokenizer.json allocates about twice what the tokenizer keeps, and glibc
    holds the freed half in the heap: hand it back to the OS, so a web process costs what
    it uses (about 16 MB less for the default model). Other C libraries (musl) have no
    malloc_trim and need none of this."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


_overhead: tuple[int, int] | None = None


def template_overhead() -> tuple[int, int]:
    """(fixed, per message): the tokens the model's chat template adds around messages,
    measured once on the real template rather than assumed (templates differ a lot)."""
    global _overhead
    if _overhead is None:
        tok = get_tokenizer()
        if not tok.chat_template:
            _overhead = (8, 8)
        else:
            def rendered(n: int) -> int:
                msgs = [{"role": "system", "content": "x"}] + [
                    {"role": "user" if i % 2 == 0 else "assistant", "content": "x"} for i in range(n)]
                return len(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True))

            x = len(tok.encode("x", add_special_tokens=False))
            one, three = rendered(1), rendered(3)
            per = (three - one) // 2 - x
            _overhead = (one - 2 * (x + per), per)
    return _overhead


def count_message_tokens(texts: list[str]) -> int:
    if not texts:
        return 0
    ids = get_tokenizer()(texts, add_special_tokens=False)["input_ids"]
    per = template_overhead()[1] + EDGE_MARGIN_PER_MESSAGE
    return sum(len(x) for x in ids) + per * len(texts)


def estimate_prompt_tokens(*, system_prompt: str, history: list[str], new: list[str], max_prompt_tokens: int) -> int:
    """What the CPU tier's prompt will cost, for the reservation made at admission: the
    system prompt and the new messages always count in full (they are never dropped);
    older history counts up to the prompt limit, since the CPU tier drops the oldest
    turns to fit it. The real count replaces this estimate when the request ends."""
    fixed = template_overhead()[0] + count_message_tokens([system_prompt, *new] if system_prompt else new)
    if fixed > max_prompt_tokens:
        return fixed
    return min(fixed + count_message_tokens(history), max_prompt_tokens)
