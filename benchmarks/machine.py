"""What a measurement ran on and beside: the CPU (model, bf16 units), memory, software,
the checkout's commit, the load and the other processes using the CPU. Every benchmark
records these: on a shared VM they explain numbers that would otherwise look wrong."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import time
from pathlib import Path

from .paths import BASE_DIR

BF16_FLAGS = ("avx512_bf16", "amx_bf16", "amx_tile", "amx_int8")


def machine_info() -> dict:
    """The CPU, memory and software the numbers were measured on, and the load at start."""
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:  # pragma: no cover
        torch_version = None
    return {
        "cpu_model": _lscpu("Model name"),
        "cpu_flags": cpu_flags(),
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "torch": torch_version,
        "loadavg_at_start": os.getloadavg(),
        "git": git_state(),
    }


def describe(info: dict) -> str:
    """One line naming the CPU, for the progress output and the printed report."""
    flags = " ".join(info.get("cpu_flags") or []) or "no bf16 flags"
    return f"{info['cpu_model'] or 'unknown CPU'}, {info['cpus']} cpus ({flags})"


def measured_on(info: dict) -> str:
    """The line a printed report opens with: the CPU and the commit it measured."""
    git = info.get("git") or {}
    dirty = f" with {len(git['dirty_files'])} modified files" if git.get("dirty_files") else ""
    return f"Measured on {describe(info)}; git {git.get('commit', '?')}{dirty}"


def _lscpu(field: str) -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith(field)), "")


def cpu_flags() -> list[str]:
    """The CPU's bf16 matmul units: whether "auto" runs bf16 and how fast it can."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].split()
    except (OSError, IndexError):
        return []
    return [f for f in BF16_FLAGS if f in flags]


def concrete_dtype(name: str) -> str:
    """The dtype a benchmark runs in: "auto" resolves as the workers resolve it on this
    CPU, so the report names what really ran."""
    if name != "auto":
        return name
    from inference.engine.config import EngineConfig

    return str(EngineConfig(model="", device="cpu").resolve_dtype()).removeprefix("torch.")


def git_state(directory: Path = BASE_DIR) -> dict:
    """The checkout's commit and its modified files."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True, timeout=10).stdout

    try:
        # Not stripped: a porcelain line starts with its two status columns (" M path").
        return {"commit": git("rev-parse", "--short", "HEAD").strip(),
                "dirty_files": [ln[3:] for ln in git("status", "--porcelain").splitlines() if ln[:2] != "??"]}
    except (OSError, subprocess.SubprocessError):
        return {}


SOURCE_SUFFIXES = (".py", ".c", ".h")  # the engine's kernels are C, built when first used


def source_digest(*paths: Path) -> str:
    """sha256 of the sources at `paths` (files or folders: Python, and the C of our kernels):
    worker processes import or build them when they start, so an edit during a run would
    measure two versions under one name."""
    h = hashlib.sha256()
    for path in paths:
        found = sorted(f for f in path.rglob("*") if f.suffix in SOURCE_SUFFIXES) if path.is_dir() else [path]
        for f in found:
            h.update(str(f.relative_to(BASE_DIR)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def load_average() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())


def busy_processes(threshold_pct: float = 20.0) -> list[str]:
    """Other processes using the CPU right now (they skew every number here)."""
    try:
        out = subprocess.run(["ps", "-eo", "pid,pcpu,args", "--sort=-pcpu", "--no-headers"],
                             capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    busy = []
    for ln in out.splitlines()[:10]:
        parts = ln.split(None, 2)
        if len(parts) == 3 and float(parts[1]) >= threshold_pct and int(parts[0]) != os.getpid():
            busy.append(f"{parts[0]} {parts[1]}% {parts[2][:90]}")
    return busy


def memory_bandwidth_gbs() -> float | None:
    """One thread summing 512 MiB of bf16 (far beyond the caches), best of 3: decode streams
    every weight once per step, so this bounds it; noisy neighbours on the host show here
    even when /proc/stat says the guest is idle."""
    try:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        x = torch.ones(256 * 2**20, dtype=torch.bfloat16)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            x.sum()
            best = min(best, time.perf_counter() - t)
        torch.set_num_threads(threads)
        return x.numel() * 2 / best / 1e9
    except Exception:  # noqa: BLE001 - a probe, never a reason to fail the run
        return None


class CpuMeter:
    """CPU used by other processes while a measurement ran, in cores (of os.cpu_count()):
    all busy time from /proc/stat minus this benchmark's own (this process and `pids`)."""

    def __init__(self, pids: list[int] | None = None):
        self.pids = pids or []
        self.start = self._sample()

    @staticmethod
    def _busy_s() -> float:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")  # not idle, not iowait

    def _own_s(self) -> float:
        total = 0.0
        for pid in ["self", *self.pids]:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except (OSError, IndexError, ValueError):
                pass
        return total

    def _sample(self) -> tuple[float, float, float]:
        try:
            return time.monotonic(), self._busy_s(), self._own_s()
        except OSError:
            return time.monotonic(), 0.0, 0.0

    def others_cores(self) -> float | None:
        t1, busy1, own1 = self._sample()
        t0, busy0, own0 = self.start
        if t1 - t0 < 0.5 or busy1 == 0.0:
            return None
        return max(0.0, (busy1 - busy0) - (own1 - own0)) / (t1 - t0)
