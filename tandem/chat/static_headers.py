"""Caching headers of the widget's files, for WhiteNoise (settings.WHITENOISE_ADD_HEADERS_FUNCTION).
No Django imports: settings load this.

- `tandem/widget.js` is the URL site owners paste, so it cannot carry a hash. It is a
  small loader, cached for five minutes and then revalidated (ETag/Last-Modified), so
  a new release reaches every visitor within minutes.
- `tandem/widget-app.<content hash>.js`, the rest of the widget, which the loader names:
  a new release is a new name, so it is cached for a year as immutable.

Both may be loaded by any site (the key's origins are checked by the config and the
socket, not here): cross-origin resource policy allows it, for pages that require it
(COEP)."""

from __future__ import annotations

import re

LOADER_MAX_AGE_S = 300
HASHED_APP = re.compile(r"/tandem/widget-app\.[0-9a-f]{12}(\.[0-9a-f]{12})?\.js$")


def widget_static_headers(headers, path: str, url: str) -> None:
    if url.endswith("/tandem/widget.js"):
        headers["Cache-Control"] = f"public, max-age={LOADER_MAX_AGE_S}"
    elif HASHED_APP.search(url):
        headers["Cache-Control"] = "public, max-age=31536000, immutable"
    else:
        return
    headers["Cross-Origin-Resource-Policy"] = "cross-origin"
