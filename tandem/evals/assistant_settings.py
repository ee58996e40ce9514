"""The settings that shape one reply (system prompt, retrieval, sampling) as a value:
read from the tenant's live settings or from its draft, always on the server. A request
made with them carries them in its spec (inference.wire.spec.RequestSpec), which every
tier reads: the pipeline needs no notion of a draft, and a client can only name a draft
by id, never send settings of its own."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from inference.pipeline.api import RequestSpec
from knowledge.selectors import retrieval_spec, settings_for
from tandem.chat.sampling import sampling_for_tandem
from tenants.models import Tenant

from .models import AssistantDraft


@dataclass(frozen=True)
class AssistantSettings:
    source: str  # "live" or "draft"
    system_prompt: str
    retrieval: dict = field(default_factory=dict)  # as knowledge.selectors.retrieval_spec; {} = off
    # Sampling overrides (None: the platform's default for Tandem's own surfaces).
    temperature: float | None = None
    frequency_penalty: float | None = None
    max_tokens: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    def apply(self, spec: RequestSpec, *, tenant: Tenant) -> RequestSpec:
        """`spec` (as services.request_spec made it from the live settings) with these."""
        quota = tenant.quota
        spec.system_prompt = self.system_prompt
        spec.retrieval = dict(self.retrieval)
        spec.sampling = sampling_for_tandem(
            quota=quota, max_tokens=min(self.max_tokens, quota.max_output_tokens) if self.max_tokens else None,
            temperature=self.temperature, frequency_penalty=self.frequency_penalty)
        return spec


def live_settings(tenant: Tenant) -> AssistantSettings:
    return AssistantSettings(source="live", system_prompt=tenant.system_prompt, retrieval=retrieval_spec(tenant))


def draft_settings(draft: AssistantDraft) -> AssistantSettings:
    retrieval = ({"k": draft.top_k, "min_score": draft.min_score, "language": settings_for(draft.tenant).language,
                  "mode": draft.mode} if draft.knowledge_enabled else {})
    return AssistantSettings(source="draft", system_prompt=draft.system_prompt, retrieval=retrieval,
                             temperature=draft.temperature, frequency_penalty=draft.frequency_penalty,
                             max_tokens=draft.max_tokens)
