"""Long run of the API fuzzer (tests/reliability/test_api_fuzz.py) against a live ``foundry serve``.

    PYTHONPATH=. .venv/bin/python bench/api_fuzz.py [--examples 100]

Runs the same tests as CI with ``--examples`` generated requests per JSON API operation (each
sent as a user and anonymously) and per OpenAI-compatible and MCP test, and prints pytest's
summary and the time each test took. A finding fails its test with the request that caused it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100, help="generated requests per operation and per test")
    args = parser.parse_args()
    env = {
        **os.environ,
        "FOUNDRY_FUZZ_EXAMPLES": str(args.examples),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
    }
    test = "tests/reliability/test_api_fuzz.py"
    command = [sys.executable, "-m", "pytest", test, "-q", "-p", "no:cacheprovider", "--durations=0"]
    sys.exit(subprocess.call(command, cwd=ROOT, env=env))


if __name__ == "__main__":
    main()
