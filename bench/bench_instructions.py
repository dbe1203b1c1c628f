"""The rule engine's cost: building the vocabulary once, and reading one prompt (p50/p99 over the test table).

    .venv/bin/python bench/bench_instructions.py --rounds 200

Prompts are the phrasing table of ``tests/unit/instructions/test_rules.py`` (half Chinese), each read ``--rounds``
times in this process; no model, no I/O.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' phrasing table

from serve_app.instructions import rule_interpreter  # noqa: E402
from serve_app.jobs import job_context  # noqa: E402
from serve_app.settings import Settings  # noqa: E402
from tests.unit.instructions.test_rules import PROMPTS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    context = job_context(Settings())
    started = time.perf_counter()
    engine = rule_interpreter(context)
    build_ms = (time.perf_counter() - started) * 1000
    times_ms = []
    for _ in range(args.rounds):
        for prompt in PROMPTS:
            started = time.perf_counter()
            engine.interpret_now(prompt)
            times_ms.append((time.perf_counter() - started) * 1000)
    times_ms.sort()
    p99 = times_ms[int(len(times_ms) * 0.99) - 1]
    print(f"vocabulary build: {build_ms:.1f} ms")
    print(f"{len(times_ms)} prompts ({len(PROMPTS)} phrasings x {args.rounds})")
    print(f"per prompt: p50 {statistics.median(times_ms):.2f} ms, p99 {p99:.2f} ms, max {times_ms[-1]:.2f} ms")


if __name__ == "__main__":
    main()
