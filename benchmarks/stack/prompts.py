"""What the platform benchmarks send: support questions long enough to be answered at
length, numbered so that both sides of a comparison send the same prompts in the same
order, and the prompt token ids the CPU tier builds from them."""

from __future__ import annotations

import threading

from .tenancy import BenchTenant

QUESTIONS = [
    "my package arrived damaged and the box was crushed. Please explain step by step how I return it, "
    "get a full refund, and what I should do with the broken item.",
    "I was charged twice for the same subscription this month. Can you walk me through how to get the "
    "duplicate charge refunded and how to stop it from happening again?",
    "the tracking page has said 'in transit' for nine days. Explain what could be going on, what you "
    "can check on your side, and what my options are if it never arrives.",
    "I want to change the shipping address on an order I placed an hour ago. Describe the process in "
    "detail and tell me what happens if the order has already been packed.",
    "the wireless headphones I bought will not pair with my laptop. Give me a detailed troubleshooting "
    "guide, starting with the simplest fixes and ending with a warranty claim.",
    "I forgot my password and the reset email never comes. Explain every step I can try to get back "
    "into my account, including what to do if my email address has changed.",
    "please compare your standard, express and overnight shipping options for a heavy parcel, and "
    "explain how each one affects the delivery date and the total price.",
    "a coupon code from your newsletter is rejected at checkout. List the reasons this might happen, "
    "how I can check each one, and how to get the discount applied anyway.",
]


def prompt_text(n: int) -> str:
    """Prompt number n. The order number comes first, so two prompts never share a
    prefix-cache block beyond the system prompt (every prefill computes its whole prompt,
    in the platform and in the engine alike)."""
    return f"Order {10000 + n}: {QUESTIONS[n % len(QUESTIONS)]}"


def prompt_ids(tokenizer, tenant: BenchTenant, text: str, *, max_context: int) -> list[int]:
    """The prompt the CPU tier builds for a new conversation's first message (same
    function, same arguments as inference.pipeline.cpu.preprocess_request)."""
    from inference.text.prompting import build_prompt

    room = max(16, max_context - tenant.max_output_tokens)
    return build_prompt(tokenizer, system_prompt=tenant.system_prompt or None,
                        history=[{"role": "user", "content": text}],
                        max_prompt_tokens=min(tenant.max_prompt_tokens, room)).token_ids


class Counter:
    """A thread-safe source of unique prompt numbers."""

    def __init__(self, start: int = 0):
        self._n = start
        self._lock = threading.Lock()

    def __call__(self) -> int:
        return self.reserve(1)

    def reserve(self, count: int) -> int:
        """Take `count` consecutive numbers; returns the first."""
        with self._lock:
            n = self._n
            self._n += count
            return n
