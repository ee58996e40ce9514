"""Bad input from a client, as every surface answers it: `InvalidInput` carries the
error code and the field (`param`) that the websocket's error frame, the REST error
object and the console's form error show. `clean_user_text` is the pipeline's own check
of a message (the CPU tier runs it again on the prompt it builds), answered here at once
as the web tier's error."""

from __future__ import annotations

from inference.pipeline import api as pipeline


class InvalidInput(ValueError):
    def __init__(self, message: str, *, code: str = "invalid_message", param: str | None = None):
        super().__init__(message)
        self.code, self.param = code, param


def clean_user_text(text: object) -> str:
    """`text` without control characters and surrounding blanks; InvalidInput (param
    "text") when it is not a string, is empty, or is too long for a message."""
    try:
        return pipeline.clean_user_text(text)
    except pipeline.TextRejected as exc:
        raise InvalidInput(str(exc), code=exc.code, param="text") from None
