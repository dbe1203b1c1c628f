"""The rule interpreter's cost: building the vocabulary once, and reading one prompt (p50/p99 over the test table).

    .venv/bin/python bench/bench_instructions.py --rounds 200
    .venv/bin/python bench/bench_instructions.py --adversarial    # the worst 2000-character prompts we know

Prompts are the phrasing table of ``tests/unit/instructions/test_rules.py`` (half Chinese), each read ``--rounds``
times in this process, or (``--adversarial``) the prompts of ``test_prompt_cost.py``, each phrase of the vocabulary
repeated to the length limit, a digit run of every script ``\\d`` reads (alone, then spaces) and ASCII digits beside
each ASCII punctuation mark; no model, no I/O. The five slowest are then read as the ingress reads them, in a worker
thread, while the event loop ticks: the loop's longest stall is what a concurrent ``/livez`` waits.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import string
import sys
import time
import unicodedata
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


def _hostile(context: JobContext) -> dict[str, str]:
    half = MAX_PROMPT_CHARS // 2
    prompts = dict(ADVERSARIAL)
    for phrase in {phrase.text for phrase in build_vocabulary(context).phrases}:
        prompts[f"{phrase!r} repeated"] = (phrase * MAX_PROMPT_CHARS)[:MAX_PROMPT_CHARS]
    for zero in (chr(code) for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)) == "Nd"):
        if unicodedata.digit(zero) != 0:
            continue  # one run per script: its zero
        prompts[f"U+{ord(zero):04X} digits"] = zero * MAX_PROMPT_CHARS
        prompts[f"U+{ord(zero):04X} digits then spaces"] = zero * half + " " * half
    for mark in string.punctuation:
        prompts[f"digits then {mark!r}"] = "1" * half + mark * half
        prompts[f"digit and {mark!r} repeated"] = ("1" + mark) * half
    return prompts


async def _loop_stall_ms(rules: RuleInterpreter, prompt: str) -> float:
    """The event loop's longest gap between 1 ms ticks while the rules read ``prompt`` in their worker thread."""
    reading = asyncio.ensure_future(rules.interpret(prompt))
    longest, last = 0.0, time.perf_counter()
    while not reading.done():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    reading.exception()  # unclear or refused: the stall is what is measured
    return longest * 1000


def worst_case(rules: RuleInterpreter, context: JobContext) -> None:
    """The slowest of the hostile prompts, and how long each of the five stalls the event loop."""
    prompts = _hostile(context)
    times_ms = sorted(((_read_ms(rules, prompt), name) for name, prompt in prompts.items()), reverse=True)
    print(f"{len(prompts)} prompts of up to {MAX_PROMPT_CHARS} characters; slowest:")
    for took_ms, name in times_ms[:5]:
        stall_ms = asyncio.run(_loop_stall_ms(rules, prompts[name]))
        print(f"  {took_ms:8.1f} ms  (event loop stalled {stall_ms:6.1f} ms)  {name}")


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
