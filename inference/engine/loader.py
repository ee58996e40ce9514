"""Loading a model the engine can serve: a Hugging Face directory (or an id already in the
local HF cache; nothing is ever fetched), checked against what DecoderModel implements,
turned into a DecoderModel, with its tokenizer, its EOS ids and a fingerprint of the
weights that is written into every KV cache it produces.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import EngineConfig
from .fingerprint import NoWeightsError, model_fingerprint
from .gguf import load_blocks
from .model import DecoderModel, few_row_blocks
from .model_dir import UnsupportedModelError, resolve_model_dir
from .openmp import on_own_thread

__all__ = ["LoadedModel", "UnsupportedModelError", "load_model", "model_fingerprint", "resolve_model_dir"]

# Decoder-only models whose forward is the one ModelRunner implements: pre-norm RMSNorm,
# RoPE, grouped-query attention, SwiGLU MLP (Qwen2 adds q/k/v biases).
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")
# RoPE variants whose frequencies do not depend on the sequence length at run time.
SUPPORTED_ROPE_TYPES = (None, "default", "linear", "llama3", "yarn")


@dataclass
class LoadedModel:
    model: DecoderModel
    tokenizer: Any  # a transformers PreTrainedTokenizerBase
    fingerprint: str
    eos_token_ids: frozenset[int]
    model_dir: Path


def check_supported(hf_config: Any, max_context: int) -> None:
    model_type = getattr(hf_config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise UnsupportedModelError(
            f"model type {model_type!r} is not supported; the engine serves "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}-style decoders"
        )
    if getattr(hf_config, "hidden_act", "silu") != "silu":
        raise UnsupportedModelError(f"activation {hf_config.hidden_act!r} is not supported (SwiGLU/silu only)")
    if getattr(hf_config, "mlp_bias", False):
        raise UnsupportedModelError("MLP biases are not supported")
    rope = getattr(hf_config, "rope_scaling", None) or {}
    rope_type = rope.get("rope_type", rope.get("type"))
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise UnsupportedModelError(f"RoPE scaling {rope_type!r} is not supported")
    window = getattr(hf_config, "sliding_window", None)
    uses_window = getattr(hf_config, "use_sliding_window", model_type == "mistral")
    if uses_window and window is not None and window < max_context:
        raise UnsupportedModelError(
            f"sliding-window attention ({window}) shorter than max_context ({max_context}) is not supported"
        )


def eos_ids(model_dir: Path, hf_config: Any, tokenizer: Any) -> frozenset[int]:
    ids: set[int] = set()
    gen_path = model_dir / "generation_config.json"
    sources = [getattr(hf_config, "eos_token_id", None)]
    if gen_path.exists():
        sources.append(json.loads(gen_path.read_text()).get("eos_token_id"))
    if not any(s is not None for s in sources):
        sources.append(getattr(tokenizer, "eos_token_id", None))
    for s in sources:
        if isinstance(s, int):
            ids.add(s)
        elif isinstance(s, list):
            ids.update(int(x) for x in s)
    return frozenset(ids)


def load_model(config: EngineConfig) -> LoadedModel:
    """Load weights and tokenizer for `config.model`, or raise UnsupportedModelError.

    The cores and threads are set on the calling thread (the engine's loop thread, started
    from it later, inherits its affinity); the loading itself runs on a thread of its own,
    so that its parallel torch work leaves no OpenMP pool behind beside the loop's
    (openmp.py)."""
    config.apply_cpu_settings()
    return on_own_thread(_load, config)


def _load(config: EngineConfig) -> LoadedModel:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    model_dir = resolve_model_dir(config.model)
    if not (model_dir / "config.json").exists():
        raise UnsupportedModelError(f"{model_dir} has no config.json; not a Hugging Face model directory")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    hf_config = AutoConfig.from_pretrained(model_dir, local_files_only=True)
    check_supported(hf_config, config.max_context)
    try:
        fingerprint = model_fingerprint(model_dir)
    except NoWeightsError as exc:
        raise UnsupportedModelError(str(exc)) from exc
    device = config.resolve_device()
    dtype = config.resolve_dtype(device)
    weights = config.resolve_weights(device)  # int8: quantized from the fp32 weights, dtype fp32
    hf_model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, local_files_only=True)
    hf_model.eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    # The GGUF blocks the weights came from, for the block kernel's few-row matmuls (gguf.py).
    wants_blocks = few_row_blocks(device, dtype, weights, config.kernels) is not None
    model = DecoderModel(hf_model, device=device, dtype=dtype, max_context=config.max_context, weights=weights,
                         kernels=config.kernels, blocks=load_blocks(model_dir, fingerprint) if wants_blocks else None)
    del hf_model  # DecoderModel holds (fused copies of) every weight it needs
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        fingerprint=fingerprint,
        eos_token_ids=eos_ids(model_dir, hf_config, tokenizer),
        model_dir=model_dir,
    )

