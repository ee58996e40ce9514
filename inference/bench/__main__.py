import importlib
import sys

SUITES = {"engine": "inference.bench.engine", "e2e": "inference.bench.e2e", "fairness": "inference.bench.fairness"}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in SUITES:
        sys.exit(f"usage: python -m inference.bench {{{'|'.join(SUITES)}}} [options]")
    importlib.import_module(SUITES[sys.argv[1]]).main(sys.argv[2:])
