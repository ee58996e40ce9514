"""The real model's tokenizer for the text tests (no weights needed)."""

import os
from pathlib import Path

import pytest

MODEL_DIR = Path(__file__).resolve().parents[3] / "var" / "models" / "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def tokenizer():
    if not (MODEL_DIR / "tokenizer.json").exists():
        if os.environ.get("CI"):
            pytest.fail(f"no tokenizer at {MODEL_DIR}; `make model` prepares it")
        pytest.skip(f"no tokenizer at {MODEL_DIR}; run `make model`")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(MODEL_DIR)
