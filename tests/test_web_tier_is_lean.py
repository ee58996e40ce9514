"""The web tier never loads torch or transformers: it counts tokens with the `tokenizers`
library and renders chat templates with Jinja (inference/text/tokenizer.py). The
import-linter contract in pyproject.toml checks the static imports (tests/test_layering.py
runs it); these check what a real web process has loaded and mapped, which also covers
imports made at run time (Django's app loading, Celery, lazy imports in the code paths a
request takes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from devstack.processes import daphne_argv, free_port, wait_for

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers")
# The target for a web process at start (issue 26); it was 430 MB with torch.
MAX_START_RSS_MB = 150

# Imports the ASGI application as daphne does, then every module of the web surfaces,
# and counts tokens as quota admission does; prints what got loaded.
IMPORT_EVERYTHING = """
import importlib, json, pkgutil, sys
import tandem.asgi
import tandem.urls
surfaces = ("tandem.chat", "tandem.api", "tandem.console")
for name in surfaces:
    package = importlib.import_module(name)
    for info in pkgutil.walk_packages(package.__path__, name + "."):
        importlib.import_module(info.name)
from inference.text import tokenizer
preloaded = tokenizer._tokenizer is not None
tokens = tokenizer.estimate_prompt_tokens(system_prompt="Be brief.", history=["Hi", "Hello!"],
                                          new=["Where is my order?"], max_prompt_tokens=2048)
print(json.dumps({"heavy": [m for m in __HEAVY__ if m in sys.modules], "preloaded": preloaded, "tokens": tokens,
                  "served": type(tokenizer.get_tokenizer()).__name__}))
""".replace("__HEAVY__", repr(HEAVY))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def torch_libraries(pid: int) -> set[str]:
    return {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if "torch" in line.split()[-1]}


def test_the_asgi_app_and_every_web_surface_module_load_without_torch_or_transformers():
    result = subprocess.run([sys.executable, "-c", IMPORT_EVERYTHING], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "TANDEM_WARM_TOKENIZER": "1"}, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["heavy"] == []
    # The tokenizer is still preloaded at start, and counts for admission.
    assert loaded["preloaded"] is True
    assert loaded["served"] == "ServedTokenizer"
    assert loaded["tokens"] > 10


def test_a_web_process_started_as_make_run_starts_it_maps_no_torch_and_starts_small(tmp_path):
    port = free_port()
    log = open(tmp_path / "web.log", "w")
    # The web tier's command line, as make run and the platform fixtures start it.
    proc = subprocess.Popen(daphne_argv("127.0.0.1", port), cwd=ROOT, env=dict(os.environ),
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _healthy(port), timeout=90, what="daphne", procs={"web": proc}, log_dir=tmp_path)
        assert torch_libraries(proc.pid) == set()
        assert rss_mb(proc.pid) <= MAX_START_RSS_MB, (tmp_path / "web.log").read_text()[-2000:]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.mark.django_db(transaction=True)
def test_a_web_process_that_served_a_chat_reply_still_maps_no_torch(platform):
    from tests.factories import make_tenant
    from tests.platform_fixtures import chat_socket, tokens_of

    tenant = make_tenant(max_output_tokens=4)
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        message_id, frames = chat.ask("Hello?")
    assert tokens_of(frames, message_id) and frames[-1]["type"] == "end"
    assert torch_libraries(platform.procs["web"].pid) == set()
