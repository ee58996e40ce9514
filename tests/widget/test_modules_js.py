"""The widget's modules' own unit tests (widget/test/*.test.mjs: the connection, the
store, the view, the hand-over, the offline form, the strings and the app that ties them),
run with Node's built-in test runner, so `make test` runs them. They need Node 20+ and
no npm package (widget/test/register.mjs loads the sources as the build does)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

WIDGET = Path(__file__).resolve().parents[2] / "widget"
NODE = shutil.which("node")


def _node_major() -> int:
    out = subprocess.run([NODE, "--version"], capture_output=True, text=True, check=True).stdout
    return int(re.match(r"v(\d+)", out)[1])


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed: the widget's unit tests need it")
def test_the_widget_modules_pass_their_unit_tests_under_nodes_test_runner():
    assert _node_major() >= 20, "the widget's unit tests need Node 20 or later (module hooks)"
    files = sorted(str(p.relative_to(WIDGET)) for p in (WIDGET / "test").glob("*.test.mjs"))
    for module in ("connection", "store", "view", "handover", "offline", "i18n", "app"):
        assert f"test/{module}.test.mjs" in files, module
    run = subprocess.run([NODE, "--import", "./test/register.mjs", "--test", *files], cwd=WIDGET,
                         capture_output=True, text=True, timeout=120)
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-6000:]
    passed = int(re.search(r"^# pass (\d+)$", report, re.M)[1])
    assert passed >= 40 and re.search(r"^# fail 0$", report, re.M), report[-2000:]
