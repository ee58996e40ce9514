"""The real model's tokenizer for the text tests (no weights needed), in both forms:
`served` (the `tokenizers` + Jinja one the web and CPU tiers run) and `transformers`
(the engine's, and the reference the served one must agree with). Tests that take
`tokenizer` run with each."""

import os
from pathlib import Path

import pytest

MODEL_DIR = Path(__file__).resolve().parents[3] / "var" / "models" / "smollm2-135m-instruct"


def _require_model() -> None:
    if not (MODEL_DIR / "tokenizer.json").exists():
        if os.environ.get("CI"):
            pytest.fail(f"no tokenizer at {MODEL_DIR}; `make model` prepares it")
        pytest.skip(f"no tokenizer at {MODEL_DIR}; run `make model`")


@pytest.fixture(scope="module")
def hf_tokenizer():
    _require_model()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(MODEL_DIR)


@pytest.fixture(scope="module")
def served_tokenizer():
    _require_model()
    from inference.text.tokenizer import ServedTokenizer

    return ServedTokenizer.from_dir(MODEL_DIR)


@pytest.fixture(scope="module", params=["served", "transformers"])
def tokenizer(request):
    return request.getfixturevalue("served_tokenizer" if request.param == "served" else "hf_tokenizer")
