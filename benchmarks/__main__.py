import importlib
import sys

SUITES = {"engine": "benchmarks.engine.run", "e2e": "benchmarks.e2e.run", "fairness": "benchmarks.fairness.run",
          "knowledge": "benchmarks.knowledge.run", "faults": "benchmarks.faults.run", "admission": "benchmarks.admission",
          "sockets": "benchmarks.sockets.run", "repetition": "benchmarks.repetition",
          "webhooks": "benchmarks.webhooks.run", "webdb": "benchmarks.webdb"}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in SUITES:
        sys.exit(f"usage: python -m benchmarks {{{'|'.join(SUITES)}}} [options]")
    importlib.import_module(SUITES[sys.argv[1]]).main(sys.argv[2:])
