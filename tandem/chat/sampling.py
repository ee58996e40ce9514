"""How a reply is sampled when the caller leaves a parameter out: one place for every
surface's defaults, each clamped by the tenant's quota at admission."""

from __future__ import annotations

from inference.wire.spec import Sampling
from tenants.models import Quota

# OpenAI's endpoint keeps OpenAI's own defaults (temperature 1, a modest max_tokens), so
# an integrator's code behaves as it does against OpenAI. Tandem's own surfaces (the
# widget, the conversation API) answer greedily, up to the tenant's output maximum: a
# support answer should be the same each time it is asked.
OPENAI_MAX_TOKENS = 256
OPENAI_TEMPERATURE = 1.0
OWN_TEMPERATURE = 0.0


def sampling_for_openai(*, quota: Quota, max_tokens: int | None = None, temperature: float | None = None,
                        top_p: float | None = None, seed: int | None = None,
                        stop: list[str] | None = None) -> Sampling:
    return Sampling(
        max_tokens=min(OPENAI_MAX_TOKENS, quota.max_output_tokens) if max_tokens is None else max_tokens,
        temperature=OPENAI_TEMPERATURE if temperature is None else temperature,
        top_p=top_p or 1.0, seed=seed, stop=stop or [],
    )


def sampling_for_tandem(*, quota: Quota, max_tokens: int | None = None, temperature: float | None = None,
                        seed: int | None = None) -> Sampling:
    return Sampling(max_tokens=max_tokens or quota.max_output_tokens,
                    temperature=temperature or OWN_TEMPERATURE, seed=seed)
