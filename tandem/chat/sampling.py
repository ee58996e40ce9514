"""How a reply is sampled when the caller leaves a parameter out: one place for every
surface's defaults, each clamped by the tenant's quota at admission."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inference.wire.spec import Sampling
from tandem.repetition.defaults import WIDGET_REPETITION

from .validation import InvalidInput

if TYPE_CHECKING:
    from tenants.models import Quota

# OpenAI's endpoint keeps OpenAI's own defaults (temperature 1, a modest max_tokens, no
# penalties), so an integrator's code behaves as it does against OpenAI. Tandem's own
# surfaces (the widget, the conversation API) answer greedily, up to the tenant's output
# maximum: a support answer should be the same each time it is asked.
OPENAI_MAX_TOKENS = 256
OPENAI_TEMPERATURE = 1.0
OWN_TEMPERATURE = 0.0
# Tandem's own surfaces sample with the tenant's repetition control (tandem.repetition),
# on by default with these penalties (tandem/repetition/defaults.py says how they were chosen).
OWN_FREQUENCY_PENALTY = WIDGET_REPETITION[0]

# What a caller of Tandem's own surfaces may set per message (the socket's `sampling`
# object, the conversation API's fields): name -> (low, high, low is exclusive).
OPTION_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "temperature": (0.0, 2.0, False), "top_p": (0.0, 1.0, True),
    "frequency_penalty": (-2.0, 2.0, False), "presence_penalty": (-2.0, 2.0, False),
    "repetition_penalty": (0.0, 10.0, True),
}
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1


def sampling_for_openai(*, quota: Quota, max_tokens: int | None = None, temperature: float | None = None,
                        top_p: float | None = None, seed: int | None = None,
                        stop: list[str] | None = None, top_k: int | None = None,
                        frequency_penalty: float | None = None, presence_penalty: float | None = None,
                        repetition_penalty: float | None = None,
                        logit_bias: list[list] | None = None, grammar: str | None = None,
                        logprobs: bool | None = None, top_logprobs: int | None = None) -> Sampling:
    return Sampling(
        max_tokens=min(OPENAI_MAX_TOKENS, quota.max_output_tokens) if max_tokens is None else max_tokens,
        temperature=OPENAI_TEMPERATURE if temperature is None else temperature,
        top_p=top_p or 1.0, top_k=top_k or 0, seed=seed, stop=stop or [],
        frequency_penalty=frequency_penalty or 0.0, presence_penalty=presence_penalty or 0.0,
        repetition_penalty=repetition_penalty or 1.0, logit_bias=logit_bias or [], grammar=grammar or "",
        logprobs=bool(logprobs), top_logprobs=top_logprobs or 0,
    )


def sampling_for_tandem(*, quota: Quota, max_tokens: int | None = None, temperature: float | None = None,
                        seed: int | None = None, frequency_penalty: float | None = None,
                        presence_penalty: float | None = None, top_p: float | None = None,
                        repetition_penalty: float | None = None) -> Sampling:
    """Tandem's own surfaces: greedy up to the tenant's output maximum, with the tenant's
    repetition control (tandem.repetition) for each penalty the caller leaves out."""
    from tandem.repetition.selectors import penalties_for

    tenant_penalties = penalties_for(tenant_id=quota.tenant_id)
    return Sampling(max_tokens=max_tokens or quota.max_output_tokens,
                    temperature=temperature or OWN_TEMPERATURE, seed=seed, top_p=top_p or 1.0,
                    frequency_penalty=tenant_penalties.frequency if frequency_penalty is None else frequency_penalty,
                    presence_penalty=tenant_penalties.presence if presence_penalty is None else presence_penalty,
                    repetition_penalty=(tenant_penalties.repetition if repetition_penalty is None
                                        else repetition_penalty))


def sampling_options(raw: object, *, param: str = "sampling") -> dict:
    """A socket message's `sampling` object checked: {name: value} for sampling_for_tandem,
    or InvalidInput (code invalid_sampling, param naming the field) for anything unknown,
    mistyped or out of range. `max_tokens` is checked against the tenant's maximum by the
    admission (max_tokens_too_large)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidInput(f"{param} must be an object.", code="invalid_sampling", param=param)
    out: dict = {}
    for name, value in raw.items():
        where = f"{param}.{name}"
        if value is None:
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if name in ("max_tokens", "seed"):
            low, high = (1, 10**9) if name == "max_tokens" else (SEED_MIN, SEED_MAX)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise InvalidInput(f"{where} must be an integer in {low}..{high}.", code="invalid_sampling",
                                   param=where)
        elif name in OPTION_BOUNDS:
            low, high, open_low = OPTION_BOUNDS[name]
            if not number or not (low < value if open_low else low <= value) or value > high:
                bound = f"more than {low:g} and at most {high:g}" if open_low else f"{low:g}..{high:g}"
                raise InvalidInput(f"{where} must be a number, {bound}.", code="invalid_sampling", param=where)
        else:
            known = ", ".join(["max_tokens", "seed", *OPTION_BOUNDS])
            raise InvalidInput(f"Unknown sampling option {where} (known: {known}).", code="invalid_sampling",
                               param=where)
        out[name] = value
    return out
