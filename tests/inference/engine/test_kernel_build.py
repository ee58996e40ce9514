"""Building our C kernels at run time (inference/engine/kernels/build.py): once per source,
headers and CPU, cached, and a clear refusal where there is no compiler."""

from __future__ import annotations

import ctypes

import pytest

from inference.engine.kernels import build as kernel_build


@pytest.fixture
def source(tmp_path, monkeypatch):
    monkeypatch.setenv("TANDEM_KERNEL_DIR", str(tmp_path / "cache"))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "answer.h").write_text("#define ANSWER 42\n")
    src = tmp_path / "src" / "answer.c"
    src.write_text('#include "answer.h"\nint answer(void) { return ANSWER; }\n')
    return src


def test_a_kernel_is_built_once_and_loads(source):
    first = kernel_build.build(source)
    assert ctypes.CDLL(str(first)).answer() == 42
    built_at = first.stat().st_mtime_ns
    again = kernel_build.build(source)
    assert again == first and again.stat().st_mtime_ns == built_at  # from the cache
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temporary left behind


def test_a_changed_header_builds_afresh(source):
    first = kernel_build.build(source)
    (source.parent / "answer.h").write_text("#define ANSWER 7\n")
    second = kernel_build.build(source)
    assert second != first and ctypes.CDLL(str(second)).answer() == 7


def test_without_a_compiler_the_kernel_is_unavailable(source, monkeypatch):
    monkeypatch.setenv("CC", str(source.parent / "no-such-cc"))
    with pytest.raises(kernel_build.KernelUnavailable, match="no-such-cc"):
        kernel_build.build(source)


def test_source_that_does_not_compile_is_unavailable_with_the_compiler_message(source):
    source.write_text("int answer(void) { return }\n")
    with pytest.raises(kernel_build.KernelUnavailable, match="could not build answer.c"):
        kernel_build.build(source)
