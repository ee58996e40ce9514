"""A tiny Llama-shaped model with seeded random weights and the real tokenizer, for tests
that need the engine's code paths fast rather than sensible text.

Built from a config (never downloaded); the same seed gives the same weights, so a test's
expected output is computed in the test from Hugging Face `generate`, not hard-coded.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .prepare import DEFAULT_DIR as REAL_MODEL_DIR
from .prepare import prepare_model

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def build_tiny_model(out_dir: Path, *, seed: int = 0, tokenizer_dir: Path = REAL_MODEL_DIR) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out_dir = Path(out_dir)
    if (out_dir / "model.safetensors").exists() and (out_dir / "tokenizer.json").exists():
        return out_dir
    tokenizer_dir = prepare_model(tokenizer_dir) if not (tokenizer_dir / "tokenizer.json").exists() else tokenizer_dir
    config = LlamaConfig(
        vocab_size=49152,  # the real tokenizer's vocabulary
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=2048,
        rope_theta=100000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    torch.manual_seed(seed)
    # Larger-than-default init spreads the logits, so greedy choices are not near-ties
    # that fp32 reduction order could flip between two implementations.
    config.initializer_range = 0.2
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp, safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).exists():
            shutil.copy(tokenizer_dir / name, tmp / name)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return out_dir
