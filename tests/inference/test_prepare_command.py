import io

from django.core.management import call_command

from inference.engine.prepare import DEFAULT_DIR, MARKER


def test_prepare_model_is_idempotent_and_leaves_a_verified_directory():
    out = io.StringIO()
    before = (DEFAULT_DIR / "model.safetensors").stat().st_mtime if (DEFAULT_DIR / MARKER).exists() else None
    call_command("prepare_model", stdout=out)
    assert (DEFAULT_DIR / MARKER).exists() and (DEFAULT_DIR / "tokenizer.json").exists()
    call_command("prepare_model", stdout=out)  # second run: nothing to do
    after = (DEFAULT_DIR / "model.safetensors").stat().st_mtime
    if before is not None:
        assert after == before
    assert "model ready at" in out.getvalue()
