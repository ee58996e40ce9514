import io

from django.core.management import call_command

from inference.engine.fingerprint import BLOCKS_FILE
from inference.engine.prepare import DEFAULT_DIR, MARKER, is_prepared


def test_prepare_model_is_idempotent_and_leaves_a_verified_directory():
    out = io.StringIO()
    before = (DEFAULT_DIR / "model.safetensors").stat().st_mtime if (DEFAULT_DIR / MARKER).exists() else None
    call_command("prepare_model", stdout=out)
    assert (DEFAULT_DIR / MARKER).exists() and (DEFAULT_DIR / "tokenizer.json").exists()
    assert is_prepared(DEFAULT_DIR)  # the GGUF's blocks matched too, in the kernel's layout
    blocks = (DEFAULT_DIR / BLOCKS_FILE).stat().st_mtime
    call_command("prepare_model", stdout=out)  # second run: nothing to do
    after = (DEFAULT_DIR / "model.safetensors").stat().st_mtime
    assert (DEFAULT_DIR / BLOCKS_FILE).stat().st_mtime == blocks
    if before is not None:
        assert after == before
    assert "model ready at" in out.getvalue()
