"""Structured outputs and sampling controls through the official client against the
live platform: parse() returns the Pydantic object the schema describes (the engine's
grammar held the model to it), a bad schema is a 400 before anything is queued, JSON
mode gives an object, and zero penalties change nothing."""

from __future__ import annotations

import json
from typing import Literal

import openai
import pytest
from pydantic import BaseModel, Field

from tandem.chat.models import Message
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


class Ticket(BaseModel):
    category: Literal["billing", "login", "shipping", "other"]
    urgent: bool
    summary: str = Field(max_length=60)


@pytest.fixture
def tenant():
    return make_tenant(max_output_tokens=96)


@pytest.fixture
def client(platform, tenant):
    return openai.OpenAI(base_url=f"{platform.base_url}/v1", api_key=tenant.secret_key.plaintext,
                         max_retries=0, timeout=300)


@pytest.fixture
def model(client):
    return client.models.list().data[0].id


ASK = [{"role": "user", "content": "I cannot log in since this morning and I need my invoice today. "
                                   "File this as a ticket."}]


def test_parse_with_a_pydantic_model_returns_the_parsed_object(client, model):
    completion = client.chat.completions.parse(model=model, messages=ASK, response_format=Ticket,
                                               max_tokens=96, temperature=0)
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "stop"
    assert isinstance(message.parsed, Ticket)
    assert Ticket.model_validate_json(message.content) == message.parsed


def test_a_streamed_json_schema_reply_is_valid_json_of_the_schema(client, model):
    with client.chat.completions.stream(model=model, messages=ASK, response_format=Ticket, max_tokens=96,
                                        temperature=0.7, seed=5) as stream:
        final = stream.get_final_completion()
    assert isinstance(final.choices[0].message.parsed, Ticket)


def test_json_mode_gives_a_json_object(client, model):
    reply = client.chat.completions.create(model=model, messages=ASK, max_tokens=96, temperature=0,
                                           response_format={"type": "json_object"})
    assert reply.choices[0].finish_reason == "stop", reply.choices[0].message.content
    assert isinstance(json.loads(reply.choices[0].message.content), dict)


@pytest.mark.parametrize("response_format,param", [
    ({"type": "json_schema", "json_schema": {"name": "t", "schema": {"type": "bogus"}}},
     "response_format.json_schema.schema"),
    ({"type": "json_schema", "json_schema": {"name": "t", "schema": {
        "type": "string", "minLength": 5, "maxLength": 2}}}, "response_format.json_schema.schema"),
])
def test_a_schema_the_engine_could_not_enforce_is_a_400_and_nothing_is_queued(client, model, tenant,
                                                                              response_format, param):
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model=model, messages=ASK, response_format=response_format)
    assert exc.value.body["code"] == "invalid_schema" and exc.value.body["param"] == param
    assert not Message.objects.filter(conversation__tenant=tenant.tenant).exists()


def test_a_malformed_response_format_is_a_400_naming_the_field(client, model):
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model=model, messages=ASK, response_format={"type": "xml"})
    assert exc.value.body["param"] == "response_format.type"


def test_zero_penalties_give_the_same_reply_and_logit_bias_bans_a_token(client, model):
    args = dict(model=model, messages=[{"role": "user", "content": "Say hello to me."}], max_tokens=12,
                temperature=0)
    plain = client.chat.completions.create(**args).choices[0].message.content
    zero = client.chat.completions.create(**args, frequency_penalty=0, presence_penalty=0,
                                          extra_body={"repetition_penalty": 1.0}).choices[0].message.content
    assert zero == plain
    first_word = plain.split()[0]
    from inference.text.tokenizer import get_tokenizer

    first_token = get_tokenizer().encode(first_word, add_special_tokens=False)[0]
    banned = client.chat.completions.create(**args, logit_bias={str(first_token): -100}).choices[0].message.content
    assert banned != plain
