"""The rule interpreter's cost: building the vocabulary once, and reading one prompt (p50/p99 over the test table).

    .venv/bin/python bench/bench_instructions.py --rounds 200
    .venv/bin/python bench/bench_instructions.py --adversarial    # the worst 2000-character prompts we know

Prompts are the phrasing table of ``tests/unit/instructions/test_rules.py`` (half Chinese), each read ``--rounds``
times in this process, or (``--adversarial``) the prompts of ``test_prompt_cost.py`` plus each phrase of the
vocabulary repeated to the length limit; no model, no I/O.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' phrasing table

from deployments.common.errors import PortraitError  # noqa: E402
from serve_app.instructions import MAX_PROMPT_CHARS, RuleInterpreter, build_vocabulary, rule_interpreter  # noqa: E402
from serve_app.jobs import JobContext, job_context  # noqa: E402
from serve_app.settings import Settings  # noqa: E402
from tests.unit.instructions.test_prompt_cost import ADVERSARIAL  # noqa: E402
from tests.unit.instructions.test_rules import PROMPTS  # noqa: E402


def _read_ms(rules: RuleInterpreter, prompt: str) -> float:
    started = time.perf_counter()
    try:
        rules.interpret_now(prompt)
    except PortraitError:
        pass  # unclear or refused: the cost is what is measured
    return (time.perf_counter() - started) * 1000


def worst_case(rules: RuleInterpreter, context: JobContext) -> None:
    """The slowest of the known adversarial prompts and of every vocabulary phrase repeated to the limit."""
    prompts = dict(ADVERSARIAL)
    for phrase in {phrase.text for phrase in build_vocabulary(context).phrases}:
        prompts[f"{phrase!r} repeated"] = (phrase * MAX_PROMPT_CHARS)[:MAX_PROMPT_CHARS]
    times_ms = sorted(((_read_ms(rules, prompt), name) for name, prompt in prompts.items()), reverse=True)
    print(f"{len(prompts)} prompts of up to {MAX_PROMPT_CHARS} characters; slowest:")
    for took_ms, name in times_ms[:5]:
        print(f"  {took_ms:8.1f} ms  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--adversarial", action="store_true", help="the worst-case prompts instead of the table")
    args = parser.parse_args()
    context = job_context(Settings())
    started = time.perf_counter()
    rules = rule_interpreter(context)
    build_ms = (time.perf_counter() - started) * 1000
    if args.adversarial:
        worst_case(rules, context)
        return
    times_ms = []
    for _ in range(args.rounds):
        for prompt in PROMPTS:
            started = time.perf_counter()
            rules.interpret_now(prompt)
            times_ms.append((time.perf_counter() - started) * 1000)
    times_ms.sort()
    p99 = times_ms[int(len(times_ms) * 0.99) - 1]
    print(f"vocabulary build: {build_ms:.1f} ms")
    print(f"{len(times_ms)} prompts ({len(PROMPTS)} phrasings x {args.rounds})")
    print(f"per prompt: p50 {statistics.median(times_ms):.2f} ms, p99 {p99:.2f} ms, max {times_ms[-1]:.2f} ms")


if __name__ == "__main__":
    main()
