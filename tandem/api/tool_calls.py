"""Tool calls (OpenAI's `tools`, `tool_choice`), for a model whose chat template has no
tool syntax (the default model's has none): the documented prompt format below, the
grammar that holds the model to it, and the reply turned back into OpenAI's shapes.

The format (docs/api.md, "Tool calls"): the functions are described in a system
message, and the model calls one by replying with nothing but

    <tool_call>{"name": "<function>", "arguments": {…}}</tool_call>

An assistant message of the history with `tool_calls` is written the same way, and a
`tool` message as a user message `<tool_response>…</tool_response>`. The grammar
(inference/engine/grammar.py) makes `required` and a named choice a call whose
arguments validate against the function's `parameters`; under `auto` the model may
instead write text (which cannot start with "<"), and a call it makes is constrained
all the same. One call per reply: `parallel_tool_calls` allows several but does not
require them."""

from __future__ import annotations

import hashlib
import json

from .structured import JSON_OPTIONS, invalid_schema

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
ANY_OBJECT = {"type": "object"}
ARGUMENT_FRAGMENT = 16  # characters of arguments per streamed delta


def active(data: dict) -> bool:
    return bool(data.get("tools")) and data.get("tool_choice") != "none"


def chosen_functions(data: dict) -> list[dict]:
    functions = [t["function"] for t in data["tools"]]
    choice = data.get("tool_choice")
    if isinstance(choice, dict):
        return [f for f in functions if f["name"] == choice["function"]["name"]]
    return functions


def system_prompt(data: dict) -> str:
    functions = [{k: f[k] for k in ("name", "description", "parameters") if k in f} for f in chosen_functions(data)]
    must = data.get("tool_choice") in ("required",) or isinstance(data.get("tool_choice"), dict)
    return (
        "You can call these functions:\n" + json.dumps(functions, ensure_ascii=False) + "\n"
        f"To call one, reply with nothing but {CALL_OPEN}" + '{"name": <function name>, "arguments": '
        f"<arguments object>}}{CALL_CLOSE}. "
        + ("You must call one now." if must else "If no function helps, answer in plain text instead.")
    )


def grammar(data: dict) -> str:
    """The llguidance grammar of the reply: a call (to one of the chosen functions, its
    arguments valid against its parameters), or, under `auto`, a call or text."""
    import llguidance

    calls = [{"type": "object", "additionalProperties": False, "required": ["name", "arguments"],
              "properties": {"name": {"const": f["name"]}, "arguments": f.get("parameters") or ANY_OBJECT}}
             for f in chosen_functions(data)]
    schema = {**(calls[0] if len(calls) == 1 else {"anyOf": calls}), "x-guidance": JSON_OPTIONS}
    rules = f'call: "{CALL_OPEN}" call_json "{CALL_CLOSE}"\ncall_json: %json {json.dumps(schema)}\n'
    if data.get("tool_choice") in (None, "auto"):
        rules = "start: call | TEXT\nTEXT: /[^<](.|\\n)*/\n" + rules
    else:
        rules = "start: call\n" + rules
    try:
        compiled = llguidance.LLMatcher.grammar_from_lark(rules)
        failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(compiled)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise invalid_schema("tools", str(exc)) from None
    if failed or messages:
        raise invalid_schema("tools", "; ".join(messages))
    return compiled


def history_text(message: dict) -> tuple[str, str]:
    """An OpenAI message as (role, content) in the prompt format above."""
    if message["role"] == "tool":
        return "user", f"<tool_response>{message.get('content') or ''}</tool_response>"
    text = message.get("content") or ""
    for call in message.get("tool_calls") or []:
        fn = call["function"]
        try:  # OpenAI sends arguments JSON-encoded; the prompt shows them as the object
            arguments = json.loads(fn["arguments"])
        except ValueError:
            arguments = fn["arguments"]
        text += CALL_OPEN + json.dumps({"name": fn["name"], "arguments": arguments}, ensure_ascii=False) \
            + CALL_CLOSE
    return message["role"], text


def parse_call(text: str, *, request_id: str) -> dict | None:
    """The tool call a finished reply made, in OpenAI's shape; None for a text reply."""
    body = text.strip()
    if not (body.startswith(CALL_OPEN) and body.endswith(CALL_CLOSE)):
        return None
    try:
        call = json.loads(body[len(CALL_OPEN) : -len(CALL_CLOSE)])
        name, arguments = call["name"], call["arguments"]
    except (ValueError, KeyError, TypeError):
        return None
    call_id = "call_" + hashlib.sha256(f"{request_id}:0".encode()).hexdigest()[:24]
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


class StreamedCalls:
    """Splits a streamed reply into content deltas and tool-call deltas: text that is or
    may become "<tool_call>" is held until the reply ends, then sent as OpenAI sends a
    call: index, id, type and name first, then the arguments in fragments."""

    def __init__(self, request_id: str):
        self.request_id = request_id
        self.held = ""
        self.text_mode = False
        self.called = False

    def feed(self, text: str) -> list[dict]:
        if self.text_mode:
            return [{"content": text}]
        self.held += text
        if CALL_OPEN.startswith(self.held) or self.held.startswith(CALL_OPEN):
            return []
        self.text_mode = True
        out, self.held = self.held, ""
        return [{"content": out}]

    def end(self) -> list[dict]:
        if self.text_mode or not self.held:
            return []
        call = parse_call(self.held, request_id=self.request_id)
        if call is None:  # cut short (max_tokens): what there was, as text
            out, self.held = self.held, ""
            return [{"content": out}]
        self.called = True
        fn = call["function"]
        deltas = [{"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                   "function": {"name": fn["name"], "arguments": ""}}]}]
        args = fn["arguments"]
        for i in range(0, len(args), ARGUMENT_FRAGMENT):
            deltas.append({"tool_calls": [{"index": 0, "function": {"arguments": args[i : i + ARGUMENT_FRAGMENT]}}]})
        return deltas


def completion_message(text: str, finish: str, *, request_id: str) -> tuple[dict, str]:
    """A finished reply as OpenAI's message and finish_reason: a call is `tool_calls`
    with null content and finish_reason "tool_calls"."""
    call = parse_call(text, request_id=request_id)
    if call is None:
        return {"role": "assistant", "content": text}, finish
    return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
