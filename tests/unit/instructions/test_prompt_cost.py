"""What one prompt may cost the ingress: its length counted in the form the rules read (after NFKC), patterns that
stay linear on any input (whitespace runs collapsed, so no two optional spaces can split a run between them; numbers
tried from the start of their digit run only, in any script), and the reading done in a worker thread under a
deadline, so the event loop keeps answering."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from deployments.common.errors import Overloaded
from serve_app.instructions import MAX_PROMPT_CHARS, InstructionUnclear, PromptTooLong, RuleInterpreter
from serve_app.instructions.rules import _EXTRACTORS
from serve_app.instructions.vocabulary import build_vocabulary, normalize
from serve_app.openai_api import INSTRUCTION_BODY_BYTES
from tests.asgi_bodies import CHUNK_BYTES, filler, send_chunked

# Each was slow before the rules were made linear: digits then a run of tabs took 11.5 s, Arabic-Indic digits then
# spaces 0.2 s (docs/BENCHMARKS.md).
ADVERSARIAL = {
    "digits then tabs": "1" * 1000 + "\t" * 999 + "k",
    "Arabic-Indic digits then spaces": "\u0663" * 1000 + " " * 1000,
    "one long digit run": "1" * 2000,
    "digits and spaces": "1 " * 1000,
    "a short phrase repeated": "蓝底" * 1000,
}


def test_a_prompt_that_grows_past_the_limit_under_nfkc_is_refused(rules):
    grows = "\ufdfa" * 200  # 200 characters; NFKC spells each out in 18
    with pytest.raises(PromptTooLong) as refused:
        rules.interpret_now(grows)
    assert refused.value.message == (
        f"the prompt has 3600 characters (NFKC-normalised); an instruction is at most {MAX_PROMPT_CHARS}"
    )


def test_whitespace_runs_read_as_one_space():
    assert normalize("修复\t\t 老照片\n\n\u3000放大  2 倍") == "修复 老照片 放大 2 倍"


@pytest.mark.parametrize("prompt", list(ADVERSARIAL.values()), ids=list(ADVERSARIAL))
def test_adversarial_prompts_get_their_answer(rules, prompt):
    if prompt.startswith("蓝底"):
        assert rules.interpret_now(prompt).fields() == {"background": "#628bce"}
    else:
        with pytest.raises(InstructionUnclear):
            rules.interpret_now(prompt)


@pytest.mark.parametrize("digit", ["1", "\u0663", "\u0967"], ids=["ascii", "arabic-indic", "devanagari"])
def test_no_digit_run_costs_the_number_patterns_more_than_linear_time(digit):
    """Ten times the prompt cap, so a pattern tried from every digit of a run (O(n²): 20 s before, for ١ and १, which
    ``\\d`` reads as digits) is told from one tried from the run's start (milliseconds) on any CI, however slow."""
    text = digit * (10 * MAX_PROMPT_CHARS)
    started = time.process_time()
    for extract in _EXTRACTORS:
        list(extract(text))
    assert time.process_time() - started < 0.5


def test_the_rules_read_off_the_event_loop_and_give_up_at_their_deadline(job_ctx, monkeypatch):
    rules = RuleInterpreter(build_vocabulary(job_ctx), job_ctx, deadline_s=0.2)
    loop_turned, released = threading.Event(), threading.Event()
    seen: list[bool] = []

    def held(prompt, hint=None):
        seen.append(loop_turned.wait(2))  # true only when the loop ran on while this was reading
        released.wait(2)

    monkeypatch.setattr(rules, "interpret_now", held)

    async def scenario():
        reading = asyncio.ensure_future(rules.interpret("蓝底一寸证件照"))
        await asyncio.sleep(0.05)
        loop_turned.set()
        try:
            with pytest.raises(Overloaded) as late:
                await reading
        finally:
            released.set()
        return late.value

    late = asyncio.run(scenario())
    assert seen == [True]
    assert (late.http_status, late.code, late.message) == (
        503,
        "overloaded",
        "reading the prompt took longer than 0.2 s; retry later",
    )


def test_an_instruction_body_past_its_cap_is_refused_unread(api):
    """The prompt's 2000 characters are counted after parsing: the body around them is capped before it is read."""
    parts = (b'{"prompt": "', *filler(5_000_000, b"a"), b'"}')
    answer = asyncio.run(send_chunked(api, "/v1/instructions", "application/json", iter(parts)))
    assert (answer.status, answer.json()["error"]["code"]) == (413, "body_too_large")
    assert answer.bytes_read <= INSTRUCTION_BODY_BYTES + CHUNK_BYTES
