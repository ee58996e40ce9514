"""Engine test fixtures: the tiny seeded model (fp32, so greedy output can be compared
token for token with Hugging Face `generate`), its references, and engines that are
always shut down."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from inference.engine.colocated import ColocatedEngine
from inference.engine.config import EngineConfig
from inference.engine.decode import DecodeEngine, DecodeRequest
from inference.engine.loader import LoadedModel, load_model
from inference.engine.model import CacheGroup
from inference.engine.prefill import PrefillEngine, PrefillRequest
from inference.engine.sampling import SamplingParams
from inference.engine.tiny import build_tiny_model

TINY_CONTEXT = 256
GREEDY = SamplingParams(temperature=0, max_tokens=16)


def tiny_config(model_dir: Path, **overrides) -> EngineConfig:
    values = dict(model=model_dir, device="cpu", dtype="float32", max_context=TINY_CONTEXT, max_batch=4,
                  prefill_max_batch=4, prefix_cache_tokens=0, prefix_block=16)
    values.update(overrides)
    return EngineConfig(**values)


def prompt(i: int, length: int) -> list[int]:
    """A deterministic prompt of `length` tokens (bos first), different for each i."""
    return [1] + [(1000 + 7919 * (i + 1) * (j + 3)) % 48000 + 100 for j in range(length - 1)]


# Ten prompts of different lengths, from a single token to a few blocks.
PROMPTS = [prompt(i, n) for i, n in enumerate([1, 2, 5, 9, 16, 17, 31, 40, 64, 77])]


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("engine") / "tiny", seed=0)


@pytest.fixture(scope="session")
def tiny(tiny_dir) -> LoadedModel:
    return load_model(tiny_config(tiny_dir))


@pytest.fixture(scope="session")
def hf_tiny(tiny_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def odd_llama():
    """A small HF Llama with what the tiny model lacks: RMSNorm scales other than 1 and
    Qwen2-style q/k/v biases, so folding and bias paths are exercised."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, rope_theta=10000.0,
                         attention_bias=True, tie_word_embeddings=True, initializer_range=0.2)
    torch.manual_seed(5)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith(".bias"):
                p.normal_(0, 0.2)
    return model


def hf_greedy(hf_model, token_ids: list[int], max_new_tokens: int, eos: int | None) -> list[int]:
    """HF generate's greedy continuation, without the EOS it may end with (the engine does
    not emit stop tokens)."""
    with torch.inference_mode():
        out = hf_model.generate(
            torch.tensor([token_ids]), attention_mask=torch.ones(1, len(token_ids), dtype=torch.long),
            max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=eos if eos is not None else 0,
        )[0, len(token_ids):].tolist()
    if eos is not None and eos in out:
        out = out[: out.index(eos)]
    return out


def hf_argmax_loop(hf_model, token_ids: list[int], n: int) -> list[int]:
    """n greedy tokens from HF's full forward, EOS not special (for ignore_eos runs)."""
    ids = list(token_ids)
    with torch.inference_mode():
        for _ in range(n):
            ids.append(int(hf_model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(token_ids):]


@pytest.fixture(scope="session")
def tiny_reference(hf_tiny, tiny) -> Callable[[list[int], int], list[int]]:
    cache: dict[tuple[tuple[int, ...], int], list[int]] = {}
    (eos,) = tiny.eos_token_ids

    def reference(token_ids: list[int], max_new_tokens: int = GREEDY.max_tokens) -> list[int]:
        key = (tuple(token_ids), max_new_tokens)
        if key not in cache:
            cache[key] = hf_greedy(hf_tiny, token_ids, max_new_tokens, eos)
        return cache[key]

    return reference


@pytest.fixture
def make_decode(tiny, tiny_dir) -> Iterator[Callable[..., DecodeEngine]]:
    engines: list[DecodeEngine] = []

    def make(**overrides) -> DecodeEngine:
        engine = DecodeEngine(tiny, tiny_config(tiny_dir, **overrides))
        engines.append(engine)
        return engine

    yield make
    for e in engines:
        e.shutdown()


@pytest.fixture
def make_colocated(tiny, tiny_dir) -> Iterator[Callable[..., ColocatedEngine]]:
    engines: list[ColocatedEngine] = []

    def make(chunked_prefill: bool = False, **overrides) -> ColocatedEngine:
        engine = ColocatedEngine(tiny, tiny_config(tiny_dir, **overrides), chunked_prefill=chunked_prefill)
        engines.append(engine)
        return engine

    yield make
    for e in engines:
        e.shutdown()


@pytest.fixture
def prefill_engine(tiny, tiny_dir) -> PrefillEngine:
    return PrefillEngine(tiny, tiny_config(tiny_dir))


def prefill_one(engine: PrefillEngine, request_id: str, token_ids: list[int],
                sampling: SamplingParams = GREEDY, salt: str | None = None):
    (result,) = engine.prefill([PrefillRequest(request_id, token_ids, sampling, salt)])
    return result


def decode_request(result, token_ids: list[int], sampling: SamplingParams = GREEDY, **kw) -> DecodeRequest:
    return DecodeRequest(result.request_id, token_ids, result.first_token, result.kv, sampling, **kw)


class Gate:
    """An on_token callback that holds the engine thread at a given index until opened,
    so a test can arrange the waiting queue without racing the step loop."""

    def __init__(self, at_index: int = 1):
        self.at_index = at_index
        self.reached = threading.Event()
        self.opened = threading.Event()

    def __call__(self, request_id: str, index: int, token_id: int, ts: float) -> None:
        if index == self.at_index:
            self.reached.set()
            assert self.opened.wait(30), "gate never opened"


class Recorder:
    """Collects (event, request_id, ...) in the order the engine thread produced them."""

    def __init__(self):
        self.events: list[tuple] = []
        self.lock = threading.Lock()

    def on_token(self, request_id: str, index: int, token_id: int, ts: float) -> None:
        with self.lock:
            self.events.append(("token", request_id, index, token_id))

    def on_finish(self, request_id: str, reason: str, stats) -> None:
        with self.lock:
            self.events.append(("finish", request_id, reason, stats.output_tokens))

    def first(self, kind: str, request_id: str) -> int:
        """Position in the event log of the first `kind` event of `request_id`."""
        return next(i for i, e in enumerate(self.events) if e[0] == kind and e[1] == request_id)


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count set to n for the block, restored after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def forced_logits(model, tokens: list[int], n_prompt: int) -> list[torch.Tensor]:
    """Logits from a prefill of tokens[:n_prompt], then one decode step per later token."""
    kvs, logits = model.prefill([tokens[:n_prompt]], [None])
    got = [logits[0].float()]
    cache = model.new_kv(1, len(tokens) + 1)
    hkv = model.shape.num_kv_heads
    cache[:, 0, :hkv, :n_prompt], cache[:, 0, hkv:, :n_prompt] = kvs[0]
    for pos in range(n_prompt, len(tokens)):
        step = model.forward(torch.tensor([[tokens[pos]]]), torch.tensor([[pos]]), [CacheGroup(cache, 0, pos + 1)],
                             torch.zeros(1, dtype=torch.long))
        got.append(step[0].float())
    return got
