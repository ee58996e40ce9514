"""The served model's vocabulary size, for checking token ids a client names
(`logit_bias`) at the door: an id past the vocabulary would otherwise have nothing to
act on in the engine. Read from the model directory's config.json, once per process."""

from __future__ import annotations

import functools
import json

from django.conf import settings

from inference.engine.model_dir import resolve_model_dir


@functools.cache
def served_vocab_size() -> int:
    config = json.loads((resolve_model_dir(settings.TANDEM_MODEL) / "config.json").read_text())
    return int(config["vocab_size"])
