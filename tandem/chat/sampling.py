"""How a reply is sampled when the caller leaves a parameter out: one place for every
surface's defaults, each clamped by the tenant's quota at admission."""

from __future__ import annotations

from inference.wire.spec import Sampling
from tenants.models import Quota

# OpenAI's endpoint keeps OpenAI's own defaults (temperature 1, a modest max_tokens, no
# penalties), so an integrator's code behaves as it does against OpenAI. Tandem's own
# surfaces (the widget, the conversation API) answer greedily, up to the tenant's output
# maximum: a support answer should be the same each time it is asked.
OPENAI_MAX_TOKENS = 256
OPENAI_TEMPERATURE = 1.0
OWN_TEMPERATURE = 0.0
# A small model answering greedily loops: on "How do I reset my password?" the default
# model wrote the same sentence about entering the new password again until max_tokens
# ended it. OpenAI's frequency penalty (per repeat of a token in the reply) stops that
# without touching the prompt's words, which a grounded answer quotes; tests/inference/
# engine/test_penalties.py shows the loop and its end on the default model.
OWN_FREQUENCY_PENALTY = 0.5


def sampling_for_openai(*, quota: Quota, max_tokens: int | None = None, temperature: float | None = None,
                        top_p: float | None = None, seed: int | None = None,
                        stop: list[str] | None = None, top_k: int | None = None,
                        frequency_penalty: float | None = None, presence_penalty: float | None = None,
                        repetition_penalty: float | None = None,
                        logit_bias: list[list] | None = None, grammar: str | None = None) -> Sampling:
    return Sampling(
        max_tokens=min(OPENAI_MAX_TOKENS, quota.max_output_tokens) if max_tokens is None else max_tokens,
        temperature=OPENAI_TEMPERATURE if temperature is None else temperature,
        top_p=top_p or 1.0, top_k=top_k or 0, seed=seed, stop=stop or [],
        frequency_penalty=frequency_penalty or 0.0, presence_penalty=presence_penalty or 0.0,
        repetition_penalty=repetition_penalty or 1.0, logit_bias=logit_bias or [], grammar=grammar or "",
    )


def sampling_for_tandem(*, quota: Quota, max_tokens: int | None = None, temperature: float | None = None,
                        seed: int | None = None, frequency_penalty: float | None = None,
                        presence_penalty: float | None = None) -> Sampling:
    return Sampling(max_tokens=max_tokens or quota.max_output_tokens,
                    temperature=temperature or OWN_TEMPERATURE, seed=seed,
                    frequency_penalty=OWN_FREQUENCY_PENALTY if frequency_penalty is None else frequency_penalty,
                    presence_penalty=presence_penalty or 0.0)
