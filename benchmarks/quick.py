"""`--quick`, the smoke run every benchmark suite has: the same code paths as the full run
on a very small workload (the tiny model where the suite serves one), so that a change
which breaks a benchmark shows in the test suite (tests/test_benchmarks.py) instead of
on the day someone needs the numbers. Its figures mean nothing.

A quick run writes its JSON under var/bench/quick/ unless `--out` says where, so it never
overwrites a full run's results; every suite's JSON says `"quick": true|false` at the top.
"""

from __future__ import annotations

import argparse

from .paths import BENCH_DIR

QUICK_DIR = BENCH_DIR / "quick"


def add_quick_options(p: argparse.ArgumentParser, *, default_out: str | None) -> None:
    """`--quick`, and `--out` whose default depends on it (`default_out` for a full run;
    None: the suite names a file of its own then)."""
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: every code path on a very small workload; its numbers mean nothing "
                        "(JSON under var/bench/quick/ unless --out)")
    where = f"default {default_out}" if default_out else "default: a new file under var/bench/"
    p.add_argument("--out", default=None, help=f"JSON results ({where}; var/bench/quick/ with --quick)")


def parse_quick(p: argparse.ArgumentParser, argv: list[str], *, name: str, default_out: str | None,
                quick_defaults: dict, parse=None) -> argparse.Namespace:
    """`argv` parsed; with `--quick`, `quick_defaults` replace the parser's defaults (an
    option given on the command line still wins) and `--out` defaults to
    var/bench/quick/<name>.json. `parse`: the suite's own parse step (e.g. resolving
    "auto" dtype), called as parse(p, argv)."""
    if "--quick" in argv:
        p.set_defaults(**quick_defaults)
    args = parse(p, argv) if parse else p.parse_args(argv)
    if args.out is None:
        args.out = str(QUICK_DIR / f"{name}.json") if args.quick else default_out
    return args
