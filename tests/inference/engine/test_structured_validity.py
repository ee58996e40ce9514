"""Strict structured outputs hold over many requests: 200 requests spread over ten
schemas (benchmarks/engine/schemas.py, the engine benchmark's validity check), greedy
and sampled, in batches that mix schemas, on the tiny model's random weights: every
reply parses and validates."""

from __future__ import annotations

from benchmarks.engine.features import structured_validity

from .conftest import PROMPTS


def test_200_strict_requests_over_10_schemas_all_parse_and_validate(tiny, make_colocated):
    engine = make_colocated(max_batch=32, max_context=512)
    result = structured_validity(engine, tiny, PROMPTS, requests=200, max_tokens=200)
    assert result["schemas"] == 10
    assert result["valid"] == 200, result["failures"]
