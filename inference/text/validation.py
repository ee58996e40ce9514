"""The pipeline's check of user text: what a prompt can take. The CPU tier runs it on
the message it builds a prompt for; the web tier runs the same check first, for an
immediate answer, and words a refusal its own way (tandem.chat.validation)."""

from __future__ import annotations

import unicodedata

MAX_MESSAGE_CHARS = 16_000


class TextRejected(ValueError):
    """The text cannot go into a prompt; `code` is the error code the request fails with."""

    def __init__(self, message: str, *, code: str = "invalid_message"):
        super().__init__(message)
        self.code = code


def clean_user_text(text: object, *, max_chars: int = MAX_MESSAGE_CHARS) -> str:
    if not isinstance(text, str):
        raise TextRejected("The message text must be a string.")
    # Control characters (other than newline and tab) break prompts and logs and are
    # never meaningful in a chat message; lone surrogates cannot be encoded at all.
    cleaned = "".join(
        ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cs")
    ).strip()
    if not cleaned:
        raise TextRejected("The message is empty.", code="empty_message")
    if len(cleaned) > max_chars:
        raise TextRejected(
            f"The message is {len(cleaned)} characters long; the maximum is {max_chars}.",
            code="message_too_long",
        )
    return cleaned
