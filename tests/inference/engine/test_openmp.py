"""on_own_thread: the loader's way of leaving no OpenMP pool behind on the caller's thread."""

from __future__ import annotations

import threading

import pytest

from inference.engine.openmp import on_own_thread


def test_the_work_runs_on_a_thread_that_has_ended_when_it_returns():
    seen = {}

    def work(a, *, b):
        seen["thread"] = threading.current_thread()
        return a + b

    assert on_own_thread(work, 2, b=3) == 5
    assert seen["thread"] is not threading.current_thread()
    assert not seen["thread"].is_alive()


def test_an_exception_reaches_the_caller_as_raised():
    def work():
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        on_own_thread(work)


def test_loading_sets_threads_on_the_caller_and_loads_elsewhere(tiny_dir, monkeypatch):
    """apply_cpu_settings runs on the caller (its affinity is what the engine's loop thread
    inherits); the weights are read on another thread."""
    import inference.engine.loader as loader

    from .conftest import tiny_config

    threads = {}
    real_load = loader._load
    real_apply = loader.EngineConfig.apply_cpu_settings

    def spy_apply(self):
        threads["apply"] = threading.current_thread()
        real_apply(self)

    def spy_load(config):
        threads["load"] = threading.current_thread()
        return real_load(config)

    monkeypatch.setattr(loader.EngineConfig, "apply_cpu_settings", spy_apply)
    monkeypatch.setattr(loader, "_load", spy_load)
    loaded = loader.load_model(tiny_config(tiny_dir))
    assert loaded.model is not None
    assert threads["apply"] is threading.current_thread() and threads["load"] is not threading.current_thread()
