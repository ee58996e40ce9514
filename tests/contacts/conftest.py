"""Contacts' tests store attachments in a directory of their own, as tests/attachments do."""

from tests.attachments.conftest import PDF, PNG, attachment_dir  # noqa: F401
