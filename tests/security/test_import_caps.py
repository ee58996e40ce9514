"""A JSONL import is capped at the same number of articles as a zip (issue 27, finding
6), counted before any record is checked or a transaction opens, in the console and
over REST."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge.importing import MAX_ARTICLES
from knowledge.models import Article
from tests.knowledge.test_api import client_for, upload

pytestmark = pytest.mark.django_db


def _records(n: int) -> bytes:
    return "\n".join(json.dumps({"title": f"T{i}", "body": "x", "source": f"s{i}"}) for i in range(n)).encode()


def test_a_jsonl_file_one_record_over_the_cap_is_refused_in_the_console_before_any_write(client, world):
    client.force_login(world.owner_a)
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/console/t/alpha/knowledge/import/",
                               {"file": SimpleUploadedFile("many.jsonl", _records(MAX_ARTICLES + 1))})
    assert response.status_code == 400
    assert f"the limit is {MAX_ARTICLES}" in response.content.decode()
    assert not Article.objects.filter(tenant=world.a.tenant).exists()
    # Refused before the import's transaction: no savepoint, no write.
    assert not [q for q in queries.captured_queries if q["sql"].startswith(("SAVEPOINT", "INSERT", "UPDATE"))]


def test_a_jsonl_file_over_the_cap_is_a_400_naming_the_file_over_rest(world):
    c = client_for(world.a)
    refused = upload(c, "many.jsonl", _records(MAX_ARTICLES + 1))
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "file"
    assert f"the limit is {MAX_ARTICLES}" in refused.json()["error"]["message"]
    assert not Article.objects.exists()
