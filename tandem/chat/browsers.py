"""A User-Agent header in words for the inbox's side panel ("Chrome 131 on Windows"):
enough for an agent to picture the visitor's screen, not a device database. The order
matters: Edge and Opera say "Chrome" too, Chrome says "Safari", and every browser on an
iPhone says "Mac OS X"."""

from __future__ import annotations

import re

_BROWSERS = (
    ("Edge", r"Edg(?:e|A|iOS)?/(\d+)"),
    ("Opera", r"(?:OPR|Opera)/(\d+)"),
    ("Samsung Internet", r"SamsungBrowser/(\d+)"),
    ("Firefox", r"(?:Firefox|FxiOS)/(\d+)"),
    ("Chrome", r"(?:Chrome|CriOS)/(\d+)"),
    ("Safari", r"Version/(\d+)[.\d]* (?:Mobile/\w+ )?Safari/"),
)
_SYSTEMS = (
    ("Android", r"Android"),
    ("iOS", r"iPhone|iPad|iPod"),
    ("Windows", r"Windows"),
    ("ChromeOS", r"CrOS"),
    ("macOS", r"Mac OS X|Macintosh"),
    ("Linux", r"Linux"),
)


def browser_in_words(user_agent: str) -> str:
    """"Firefox 133 on Linux", "Safari on iOS", or "" when nothing is known."""
    ua = user_agent or ""
    if not ua.strip():
        return ""
    browser = ""
    for name, pattern in _BROWSERS:
        m = re.search(pattern, ua)
        if m:
            browser = f"{name} {m.group(1)}"
            break
    if "HeadlessChrome" in ua:
        browser = browser.replace("Chrome", "Headless Chrome", 1) if browser else "Headless Chrome"
    system = next((name for name, pattern in _SYSTEMS if re.search(pattern, ua)), "")
    if browser and system:
        return f"{browser} on {system}"
    return browser or system or ua[:60]
