"""Compile a kernel's C source into a shared library for this CPU, once, and cache it.

Built at run time rather than at install time because `-march=native` must describe
the machine that runs it (a Docker image is built on one CPU and run on others). The
cache key covers the source and the headers beside it, the flags, the compiler's
version and the CPU's feature flags, so a changed kernel or a different CPU builds
afresh. Several workers starting together may build the same library: each writes a
temporary file and renames it into place, so none ever loads a half-written one.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..cpu import cpu_flags

log = logging.getLogger(__name__)

# Vector maths (glibc's libmvec for expf) needs -ffast-math; where that does not link
# (no libmvec), the plain build still runs, with scalar expf. OpenMP first: a kernel that
# splits its own work does so in torch's thread pool (its libgomp: the same soname, so the
# loader binds the kernel to the copy torch already loaded); without it, on one thread.
FLAG_SETS = (
    ["-O3", "-march=native", "-ffast-math", "-fopenmp", "-fPIC", "-shared"],
    ["-O3", "-march=native", "-ffast-math", "-fPIC", "-shared"],
    ["-O3", "-march=native", "-fPIC", "-shared"],
)
LIBS = (["-lmvec", "-lm"], ["-lmvec", "-lm"], ["-lm"])
COMPILE_TIMEOUT_S = 120


class KernelUnavailable(RuntimeError):
    """The kernel cannot be built here; the message says why."""


def cache_dir() -> Path:
    configured = os.environ.get("TANDEM_KERNEL_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tandem" / "kernels"


def compiler() -> str:
    found = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not found:
        raise KernelUnavailable("no C compiler (cc or gcc) on PATH")
    return found


def build(source: Path) -> Path:
    """The shared library built from `source` for this CPU (compiled on first use)."""
    cc = compiler()
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise KernelUnavailable(f"{cc} --version failed: {exc}") from exc
    text = source.read_bytes() + b"".join(h.read_bytes() for h in sorted(source.parent.glob("*.h")))
    errors = []
    for flags, libs in zip(FLAG_SETS, LIBS, strict=True):
        key = hashlib.sha256(b"\0".join([
            text, " ".join(flags + libs).encode(), version.encode(), " ".join(sorted(cpu_flags())).encode(),
        ])).hexdigest()[:16]
        target = cache_dir() / f"{source.stem}-{key}.so"
        if target.exists():
            return target
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
            os.close(fd)
        except OSError as exc:
            raise KernelUnavailable(f"cannot write the kernel cache {target.parent}: {exc}") from exc
        try:
            done = subprocess.run([cc, *flags, "-o", tmp, str(source), *libs], capture_output=True, text=True,
                                  timeout=COMPILE_TIMEOUT_S)
            if done.returncode == 0:
                os.replace(tmp, target)
                log.info("built %s with %s", target.name, " ".join(flags))
                return target
            errors.append(done.stderr.strip()[-400:])
        except (OSError, subprocess.SubprocessError) as exc:
            errors.append(str(exc))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise KernelUnavailable(f"{cc} could not build {source.name}: {' | '.join(errors)}")


def load_library(source: Path, *, fallback: str, supported: str | None = None,
                 unsupported: str = "") -> ctypes.CDLL | None:
    """The library built from `source` for this CPU, or None where it cannot be built, or
    where its `supported` function says this CPU lacks what it needs: the engine then does
    `fallback`, and the log says why."""
    try:
        lib = ctypes.CDLL(str(build(source)))
    except (KernelUnavailable, OSError) as exc:
        log.warning("%s kernel unavailable, %s: %s", source.stem, fallback, exc)
        return None
    if supported is not None and not getattr(lib, supported)():
        log.info("%s kernel: %s; %s", source.stem, unsupported, fallback)
        return None
    return lib
