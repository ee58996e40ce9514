"""Tool calls through the official client against the live platform: a required or
named call is held by the grammar to its function's parameters, the streamed deltas are
OpenAI's (index, id, type and name first, then argument fragments) and the client's own
accumulator reassembles them, and a history with calls and results is accepted."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest
from pydantic import BaseModel

from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)

ORDER_STATUS = {"type": "function", "function": {
    "name": "order_status", "description": "Look up where a customer's order is.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string", "maxLength": 20},
                                                    "notify": {"type": "boolean"}},
                   "required": ["order_id", "notify"], "additionalProperties": False}}}
REFUND = {"type": "function", "function": {
    "name": "refund", "parameters": {"type": "object", "properties": {"amount": {"type": "number"}},
                                     "required": ["amount"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "Where is my order 12345? Tell me by e-mail when it moves."}]


@pytest.fixture
def client(platform):
    tenant = make_tenant(max_output_tokens=64)
    return openai.OpenAI(base_url=f"{platform.base_url}/v1", api_key=tenant.secret_key.plaintext,
                         max_retries=0, timeout=300)


@pytest.fixture
def model(client):
    return client.models.list().data[0].id


def test_a_required_call_has_arguments_that_validate_against_the_functions_parameters(client, model):
    reply = client.chat.completions.create(model=model, messages=ASK, tools=[ORDER_STATUS, REFUND],
                                           tool_choice="required", max_tokens=64, temperature=0)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    fn = {"order_status": ORDER_STATUS, "refund": REFUND}[call.function.name]["function"]
    jsonschema.validate(json.loads(call.function.arguments), fn["parameters"])


class LookUp(BaseModel):
    order_id: str
    notify: bool


def test_a_streamed_named_call_is_reassembled_by_the_clients_accumulator(client, model):
    tool = openai.pydantic_function_tool(LookUp, name="look_up")
    with client.chat.completions.stream(
            model=model, messages=ASK, tools=[tool], max_tokens=64, temperature=0,
            tool_choice={"type": "function", "function": {"name": "look_up"}}) as stream:
        chunks = [event.chunk for event in stream if event.type == "chunk"]
        final = stream.get_final_completion()
    call_deltas = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    first, rest = call_deltas[0], call_deltas[1:]
    assert first.index == 0 and first.id and first.type == "function" and first.function.name == "look_up"
    assert rest and all(d.index == 0 and d.id is None and d.function.name is None for d in rest)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    (call,) = final.choices[0].message.tool_calls
    assert call.id == first.id
    assert isinstance(call.function.parsed_arguments, LookUp)
    assert "".join(d.function.arguments for d in call_deltas) == call.function.arguments


def test_a_history_with_a_call_and_its_result_is_answered(client, model):
    first = client.chat.completions.create(model=model, messages=ASK, tools=[ORDER_STATUS],
                                           tool_choice="required", max_tokens=64, temperature=0)
    call = first.choices[0].message.tool_calls[0]
    messages = [*ASK, first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": '{"status": "shipped"}'}]
    reply = client.chat.completions.create(model=model, messages=messages, tools=[ORDER_STATUS],
                                           tool_choice="none", max_tokens=24, temperature=0)
    assert reply.choices[0].message.content and reply.choices[0].message.tool_calls is None


@pytest.mark.parametrize("extra,param", [
    ({"tools": [ORDER_STATUS], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [ORDER_STATUS, ORDER_STATUS]}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "bogus"}}}],
      "tool_choice": "required"}, "tools"),
])
def test_bad_tools_are_400s_naming_the_field(client, model, extra, param):
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model=model, messages=ASK, **extra)
    assert exc.value.body["param"] == param
