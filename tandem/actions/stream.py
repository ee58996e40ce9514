"""A tool call's tokens are not for the visitor: the widget socket passes a reply's
frames through a CallHider, which holds tokens while the text so far is or may become
"<tool_call>", lets them go once it cannot, and at the reply's end drops a call's tokens
(a call cut short by the token budget too) and says `finish_reason: "tool_calls"` (the visitor then reads the call's status line,
an `action` frame; agents read the call in the transcript). Under tools the grammar
lets a text reply never start with "<", so only a call is held to its end."""

from __future__ import annotations

from tandem.api.tool_calls import CALL_OPEN


class CallHider:
    def __init__(self):
        self.held: list[dict] = []
        self.text = ""
        self.decided = False  # text: frames pass straight through

    def frames(self, frames: list[dict]) -> list[dict]:
        out: list[dict] = []
        for f in frames:
            if self.decided or f["type"] not in ("token", "end"):
                out.append(f)
                continue
            if f["type"] == "token":
                self.held.append(f)
                self.text += f["text"]
                start = self.text.lstrip()
                if CALL_OPEN.startswith(start) or start.startswith(CALL_OPEN):
                    continue
                out += self.held
            else:
                if self.text.strip().startswith(CALL_OPEN):
                    # A call (one cut short too: calls.py settles it as a failed call).
                    f = {**f, "finish_reason": "tool_calls"}
                else:
                    out += self.held  # text after all
                out.append(f)
            self.held, self.decided = [], True
        return out
