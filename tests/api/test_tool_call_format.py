"""The tool-call prompt format and its shapes, without a model: a call parses into
OpenAI's message, a text reply stays text, and a stream holds only what may still turn
out to be a call."""

from __future__ import annotations

import json

from tandem.api import tool_calls

CALL = '<tool_call>{"name": "refund", "arguments": {"amount": 12.5}}</tool_call>'


def test_a_finished_call_becomes_tool_calls_with_null_content():
    message, finish = tool_calls.completion_message(CALL, "stop", request_id="r1")
    assert finish == "tool_calls" and message["content"] is None
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "refund"
    assert json.loads(call["function"]["arguments"]) == {"amount": 12.5}
    assert call["id"] == tool_calls.completion_message(CALL, "stop", request_id="r1")[0]["tool_calls"][0]["id"]


def test_text_and_a_call_cut_short_stay_text():
    assert tool_calls.completion_message("Hello!", "stop", request_id="r")[0] == {"role": "assistant",
                                                                                  "content": "Hello!"}
    cut = CALL[:30]
    assert tool_calls.completion_message(cut, "length", request_id="r") == (
        {"role": "assistant", "content": cut}, "length")


def test_a_stream_sends_text_at_once_and_a_call_as_name_then_argument_fragments():
    text = tool_calls.StreamedCalls("r")
    assert text.feed("Hi") == [{"content": "Hi"}] and text.feed(" there") == [{"content": " there"}]
    assert text.end() == [] and not text.called

    call = tool_calls.StreamedCalls("r")
    held = [d for piece in (CALL[:5], CALL[5:20], CALL[20:]) for d in call.feed(piece)]
    assert held == []
    deltas = call.end()
    assert call.called
    head = deltas[0]["tool_calls"][0]
    assert head["index"] == 0 and head["id"].startswith("call_") and head["function"] == {"name": "refund",
                                                                                          "arguments": ""}
    args = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas[1:])
    assert json.loads(args) == {"amount": 12.5} and all("id" not in d["tool_calls"][0] for d in deltas[1:])


def test_history_writes_calls_and_results_in_the_prompt_format():
    role, text = tool_calls.history_text({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "refund", "arguments": '{"amount": 12.5}'}}]})
    assert role == "assistant" and text == CALL
    assert tool_calls.history_text({"role": "tool", "tool_call_id": "call_1", "content": "done"}) == (
        "user", "<tool_response>done</tool_response>")
