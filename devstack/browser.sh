#!/usr/bin/env bash
# `make test` needs a Chromium for the browser tests (Playwright drives the system one;
# its own download does not work offline). Install it where we can, or stop at once with
# the one line that says what to do: never a failure after minutes of tests.
set -euo pipefail
for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then exit 0; fi
done
if [ -n "${TANDEM_CHROMIUM:-}" ] && [ -x "$TANDEM_CHROMIUM" ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "[make test] installing chromium with apt (the browser tests need it)" >&2
    if apt-get install -y -qq chromium >/dev/null 2>&1 \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; then
        exit 0
    fi
fi
echo "make test: the browser tests need Chromium: install it (Debian/Ubuntu: 'sudo apt-get install chromium'; macOS: 'brew install --cask chromium') or set TANDEM_CHROMIUM=/path/to/chrome" >&2
exit 1
