"""The fingerprint of a model's weights: written into every KV cache a prefill produces,
checked by every decode that takes one, and the key of a model's quality verdicts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

# Config keys that change between saves of the same weights and must not change the hash.
_VOLATILE_CONFIG_KEYS = ("transformers_version", "torch_dtype", "dtype", "_name_or_path", "use_cache")
# Files the engine derives from the weights and writes beside them (gguf.BLOCKS_FILE):
# not weights of the model, and keyed by this very fingerprint.
DERIVED_PREFIX = "tandem-"
# The GGUF's weight blocks matched to the weights (gguf.py), written by model preparation,
# in the layout of this version of the block kernel (another is matched again).
BLOCKS_FILE = DERIVED_PREFIX + "blocks.safetensors"
BLOCKS_LAYOUT = "2"  # 1: fp16 scales; 2: fp32 scales
_SAMPLE_BYTES = 1 << 16
_SAMPLES_PER_FILE = 16


class NoWeightsError(ValueError):
    """The directory holds no weight files."""


def model_fingerprint(model_dir: Path) -> str:
    """sha256 over the config and the weight files' headers and sampled bytes.

    Independent of the dtype the weights are served in, so a bf16 prefill tier and an
    fp32 decode tier of the same weights accept each other's KV. Sampling (rather than
    hashing gigabytes) is enough to tell different checkpoints apart.
    """
    h = hashlib.sha256()
    config = json.loads((model_dir / "config.json").read_text())
    for key in _VOLATILE_CONFIG_KEYS:
        config.pop(key, None)
    h.update(json.dumps(config, sort_keys=True).encode())
    weight_files = [p for p in sorted(model_dir.glob("*.safetensors")) or sorted(model_dir.glob("*.bin"))
                    if not p.name.startswith(DERIVED_PREFIX)]
    if not weight_files:
        raise NoWeightsError(f"no weight files (*.safetensors, *.bin) in {model_dir}")
    for path in weight_files:
        size = path.stat().st_size
        h.update(f"{path.name}:{size}".encode())
        with open(path, "rb") as f:
            if path.suffix == ".safetensors":
                header_len = int.from_bytes(f.read(8), "little")
                h.update(f.read(header_len))  # names, dtypes, shapes, offsets
            for i in range(_SAMPLES_PER_FILE):
                f.seek(size * i // _SAMPLES_PER_FILE)
                h.update(f.read(_SAMPLE_BYTES))
    return h.hexdigest()[:32]


def safetensors_metadata(path: Path) -> dict:
    """The `__metadata__` of a safetensors file's header ({} where it has none or cannot
    be read): read without loading any tensor."""
    try:
        with open(path, "rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    except (OSError, ValueError):
        return {}
    return header.get("__metadata__") or {}
