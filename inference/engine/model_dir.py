"""Which directory a model setting names, without importing torch: the web and CPU tiers
resolve it to read the tokenizer, and must not pay for loading the engine to do so."""

from __future__ import annotations

from pathlib import Path


class UnsupportedModelError(ValueError):
    """The model cannot be served by this engine; the message says why."""


def resolve_model_dir(model: str | Path) -> Path:
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if path.is_absolute() or str(model).startswith((".", "~")) or str(model).count("/") > 1:
        raise UnsupportedModelError(f"model directory {path} does not exist")
    try:  # a hub id: only what is already in the local cache
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(model), local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - any failure means "not available offline"
        raise UnsupportedModelError(
            f"model {model!r} is neither a directory nor in the local Hugging Face cache "
            "(the engine never downloads weights)"
        ) from exc
