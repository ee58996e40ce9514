"""Dense vectors for chunks and questions, from a model that ships inside a PyPI
package: WordLlama's `l2_supercat` (MIT licence; the `wordllama` wheel carries its
256-dimensional token embeddings, 16 MB of float16 safetensors, and its tokenizer). A
text's vector is the mean of its tokens' embeddings, normalised: a static embedding,
no transformer runs, so a question embeds in well under a millisecond on the CPU tier.

The files are read from the installed package by path. WordLlama's own `load()` looks
for the tokenizer under another folder name than the wheel uses and then downloads it
from a hub; nothing here calls it, so nothing is ever downloaded. Without the package
`available()` is False and retrieval is full-text alone.

Vectors are stored as float16 bytes (`Chunk.embedding`, 512 bytes a chunk) and scored
as float32 (`dense`)."""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path

MODEL = "wordllama l2_supercat 256"
DIM = 256
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _files() -> tuple[Path, Path] | None:
    try:
        import wordllama
    except ImportError:
        return None
    root = Path(wordllama.__file__).parent
    weights, tokenizer = root / "weights" / "l2_supercat_256.safetensors", \
        root / "tokenizers" / "l2_supercat_tokenizer_config.json"
    return (weights, tokenizer) if weights.is_file() and tokenizer.is_file() else None


def available() -> bool:
    return _files() is not None


_model = None


def _load():
    global _model
    with _lock:
        if _model is None:
            from safetensors import safe_open
            from tokenizers import Tokenizer
            from wordllama.inference import WordLlamaInference

            weights, tokenizer = _files()
            with safe_open(str(weights), framework="np") as f:
                table = f.get_tensor("embedding.weight")  # [vocab, 256] float16
            _model = WordLlamaInference(table, Tokenizer.from_file(str(tokenizer)))
        return _model


def embed(texts: list[str]):
    """[len(texts), DIM] float32, each row unit length (a zero row for a text with no tokens)."""
    import numpy as np

    if not texts:
        return np.zeros((0, DIM), dtype=np.float32)
    vectors = _load().embed([t or " " for t in texts], norm=True)
    return np.nan_to_num(np.asarray(vectors, dtype=np.float32))


def chunk_text(title: str, heading: str, text: str) -> str:
    """What a chunk's vector is computed from: its context, then its text."""
    return ". ".join(p for p in (title, heading, text) if p)


def to_bytes(vector) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype=np.float16).tobytes()
