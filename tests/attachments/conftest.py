"""Attachments' storage in a directory of the test's own, and small real files."""

from __future__ import annotations

import pytest

# The smallest valid PNG (1×1, one pixel) and PDF heads: what kinds.sniff reads.
PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
       b"\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


@pytest.fixture
def attachment_dir(settings, tmp_path):
    """The attachments storage as a fresh local directory (Django resets its storages
    when STORAGES changes)."""
    settings.STORAGES = {**settings.STORAGES, "attachments": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path / "files")}}}
    return tmp_path / "files"
