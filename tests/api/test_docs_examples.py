"""The examples in docs/api.md run as written against the live platform."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)
DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture
def doc_env(platform):
    key = make_tenant(max_output_tokens=32).secret_key.plaintext
    return {**os.environ, "TANDEM_BASE_URL": platform.base_url, "TANDEM_API_KEY": key}


def test_the_python_example_runs(doc_env):
    # Later examples build on the first one's client and model: run them in order.
    code = "\n".join(blocks("python"))
    result = subprocess.run([sys.executable, "-c", code], env=doc_env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "tokens" in result.stdout
    assert "category=" in result.stdout  # the structured-output example printed its parsed Ticket


def test_the_curl_examples_run(doc_env):
    scripts = [b for b in blocks("bash") if "curl" in b]
    assert len(scripts) == 2
    for script in scripts:
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=doc_env,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        assert '"error"' not in result.stdout, result.stdout
        assert '"content"' in result.stdout
