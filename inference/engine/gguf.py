"""The quantized blocks of the GGUF file a model directory was prepared from, matched to
the model's weights, for the block kernel (kernels/block_linear.py).

The default model ships as a Q4_1 GGUF and is served as the fp32 weights transformers
dequantized from it; a few-row matmul can read the file's blocks instead (under a
quarter of the fp32 weights' bytes). Model preparation matches them once (`matching_blocks`: a matrix takes
its blocks only where they dequantize to exactly the weight the model holds, element for
element, after undoing the row order llama.cpp's converter gives q and k) and saves them
in the kernel's layout beside the weights (BLOCKS_FILE), keyed by the weights'
fingerprint: `load_blocks` returns nothing for a directory whose weights changed since,
which then serves its weights as they are. (Matching at every load would parse the
file's metadata, its whole vocabulary, which the gguf reader takes seconds for.)
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .fingerprint import BLOCKS_FILE, BLOCKS_LAYOUT, model_fingerprint
from .kernels.block_linear import BLOCK, KINDS, Blocks

log = logging.getLogger(__name__)


# GGUF tensor names of a llama-style decoder -> the Hugging Face module names they load into.
LAYER_NAMES = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def hf_name(gguf_name: str) -> str | None:
    """`blk.3.attn_q.weight` -> `model.layers.3.self_attn.q_proj.weight` (None: not a matrix we map)."""
    parts = gguf_name.split(".")
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output.weight":
        return "lm_head.weight"
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in LAYER_NAMES and parts[3] == "weight":
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}.weight"
    return None


def unpermute_rows(n: int, heads: int) -> torch.Tensor:
    """The row order that takes llama.cpp's q/k layout (RoPE pairs interleaved per head) back
    to Hugging Face's (halves): HF row i is file row order[i]. The inverse of the permutation
    llama.cpp's converter applies, as transformers undoes it when it reads a GGUF."""
    half = n // heads // 2
    return torch.arange(n).view(heads, half, 2).transpose(1, 2).reshape(n)


def matching_blocks(gguf_path: Path, hf_model: Any) -> dict[str, Blocks]:
    """{HF weight name: Blocks} for every matrix of the file whose blocks the kernel reads and
    which dequantize to exactly the model's weight. Logs what it matched and what it left."""
    from gguf import GGUFReader

    t0, gguf_path = time.perf_counter(), Path(gguf_path)
    cfg = hf_model.config
    weights = dict(hf_model.named_parameters())
    if getattr(cfg, "tie_word_embeddings", False) and "lm_head.weight" not in weights:
        weights["lm_head.weight"] = hf_model.get_output_embeddings().weight
    heads = {"attn_q": cfg.num_attention_heads, "attn_k": cfg.num_key_value_heads}
    found: dict[str, Blocks] = {}
    left: list[str] = []
    for tensor in GGUFReader(str(gguf_path)).tensors:
        name = hf_name(tensor.name)
        if name is None:
            continue
        want = weights.get(name)
        kind = tensor.tensor_type.name
        if want is None or kind not in KINDS or want.dtype != torch.float32:
            left.append(f"{tensor.name} ({kind})")
            continue
        blocks = Blocks.from_gguf(kind, np.asarray(tensor.data))
        role = tensor.name.split(".")[2] if tensor.name.startswith("blk.") else ""
        if role in heads:
            blocks = blocks.rows(unpermute_rows(blocks.n, heads[role]))
        if tuple(want.shape) != (blocks.n, blocks.k) or not torch.equal(blocks.dequantize(), want.detach()):
            left.append(f"{tensor.name} (not the model's weights)")
            continue
        found[name] = blocks
    if found and "lm_head.weight" not in found and getattr(cfg, "tie_word_embeddings", False):
        embed = found.get("model.embed_tokens.weight")
        if embed is not None:
            found["lm_head.weight"] = embed
    held = {id(b): b for b in found.values()}.values()  # a tied LM head shares the embedding's
    log.info("GGUF blocks: %d matrices of %s match the weights (%.0f MB, %.1f s)%s", len(found), gguf_path.name,
             sum(b.nbytes for b in held) / 1e6, time.perf_counter() - t0, f"; left: {', '.join(left)}" if left else "")
    return found


def save_blocks(model_dir: Path, blocks: dict[str, Blocks]) -> Path:
    """Write `blocks` into the model directory's BLOCKS_FILE, keyed by its weights' fingerprint.
    A matrix that shares another's blocks (a tied LM head) is stored once, as an alias."""
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    kinds: dict[str, str] = {}
    aliases: dict[str, str] = {}
    stored: dict[int, str] = {}
    for name, b in blocks.items():
        if id(b) in stored:
            aliases[name] = stored[id(b)]
            continue
        stored[id(b)], kinds[name] = name, b.kind
        tensors[f"{name}.qs"], tensors[f"{name}.d"] = b.qs, b.d
        if b.m is not None:
            tensors[f"{name}.m"] = b.m
    meta = {"fingerprint": model_fingerprint(Path(model_dir)), "layout": BLOCKS_LAYOUT, "kinds": json.dumps(kinds),
            "aliases": json.dumps(aliases)}
    path = Path(model_dir) / BLOCKS_FILE
    tmp = path.with_suffix(".part")
    save_file(tensors, str(tmp), metadata=meta)
    tmp.chmod(0o644)  # workers may run as another user than the one preparing the model
    tmp.rename(path)
    return path


def load_blocks(model_dir: Path, fingerprint: str) -> dict[str, Blocks]:
    """The model directory's saved blocks, or {} where there are none or they were matched
    to other weights than the directory now holds (`fingerprint`: model_fingerprint's)."""
    from safetensors import safe_open

    path = Path(model_dir) / BLOCKS_FILE
    if not path.exists():
        return {}
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        if meta.get("fingerprint") != fingerprint or meta.get("layout") != BLOCKS_LAYOUT:
            log.warning("%s was matched to other weights or written for another kernel layout; the weights "
                        "serve as they are (`make model` matches them again)", path)
            return {}
        found = {}
        for name, kind in json.loads(meta["kinds"]).items():
            qs, d = f.get_tensor(f"{name}.qs"), f.get_tensor(f"{name}.d")
            m = f.get_tensor(f"{name}.m") if kind == "Q4_1" else None
            found[name] = Blocks(kind, qs, d, m, d.shape[0], d.shape[1] * BLOCK)
    for name, target in json.loads(meta["aliases"]).items():
        found[name] = found[target]
    return found
