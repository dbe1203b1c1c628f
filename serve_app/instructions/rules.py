"""The built-in instruction interpreter (its answers say ``engine: rules``): phrases and number patterns, no
model. Fast, deterministic, data-driven.

A prompt is read in three steps. (1) Every phrase of the :class:`Vocabulary` and every number pattern (upscale
factors, file-size limits, sizes, DPI, hex colours, "<option> <number>") proposes what it matched; where proposals
overlap the longest wins (小一寸 over 一寸, "6寸相纸" the layout over nothing). (2) The job is the one job the
proposals name (a job phrase, or an option only that job has: 蓝底 is an ID-photo option); none or several is a
refusal, never a guess. An option of a whole job and of its steps (蓝底: ``idphoto`` and ``idphoto-background``)
names the whole job; a step is chosen only when a phrase names it (只抠图, 加水印), and then it takes the job's place.
(3) The options go through the job's own parameter model, so the answer is always valid.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from deployments.common.errors import InvalidParameter
from serve_app.deadlines import in_thread_within
from serve_app.instructions.config import RULES_DEADLINE_S
from serve_app.instructions.interface import Instruction, InstructionUnclear, JobHint, check_prompt
from serve_app.instructions.vocabulary import Vocabulary, normalize
from serve_app.jobs import JobContext, parse_job_params
from serve_app.registry import JOB_ENTRIES

INTERPRETER = "rules"
_CN_DIGITS = {"一": 1, "二": 2, "两": 2, "俩": 2, "三": 3, "四": 4, "五": 5, "六": 6, "八": 8, "十": 10}
# A number is matched from the start of its digit run only (``_RUN_START``), so a run of n digits costs O(n), not
# O(n²) tries from each of its digits; with whitespace collapsed by ``normalize`` the patterns are linear-time.
_RUN_START = r"(?<!\d)"
_NUMBER = rf"{_RUN_START}(\d+(?:\.\d+)?|[一二两俩三四五六八十])"
_KB_UNIT = r"(kb|k|千字节|mb|m|兆)(?![a-z])"
_KB_AT_MOST = r"不超过|不大于|不高于|不能超过|小于|低于|少于|最大|最多|上限|under|below|less than|smaller than|at most"
_KB_AT_MOST += r"|max(?:imum)?|no more than|not more than|up to|within|<=?|≤"
_KB_AT_LEAST = r"不小于|不低于|不少于|大于|高于|至少|最小|下限|at least|more than|over|above|min(?:imum)?|>=?|≥"
_KB_AT_MOST_AFTER = r"以内|以下|之内|内|or less|or smaller|max"
_KB_AT_LEAST_AFTER = r"以上|or more|or larger|min"
_SIZE_UNITS = {"px": 1.0, "像素": 1.0, "mm": 1.0, "毫米": 1.0, "cm": 10.0, "厘米": 10.0, "in": 25.4, "inch": 25.4}
_SIZE_UNITS |= {"inches": 25.4, "英寸": 25.4}
# A number stands alone: no letter, dot or digit beside it (Chinese text is fine). ``\d`` is a digit of any script
# (١, १), so the edges say ``\d`` too: a run of ١ then starts one try, not one per digit (that was O(n²), 0.2 s).
_EDGE_BEFORE = r"(?<![a-z\d.])"
_EDGE_AFTER = r"(?![a-z\d.])"
_SMALLEST_PX = 100  # a size below this without a unit is millimetres: no ID photo is under 100 px
_WHOLE_JOB = {entry.name: entry.step_of or entry.name for entry in JOB_ENTRIES}  # a step's whole job; a job's itself


@dataclass(frozen=True)
class Finding:
    """What one stretch of the prompt says: the jobs it points to (empty: none) and the options it sets."""

    start: int
    end: int
    text: str
    tasks: frozenset[str]
    values: Mapping[str, Any] = field(default_factory=dict)
    reading: str = ""  # how a number was read, when that is not obvious ("50KB" as an upper limit)
    weak: bool = False  # a default reading ("放大" alone is 2x): yields to any other finding for the same option

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def names_job_only(self) -> bool:
        return bool(self.tasks) and not self.values

    @property
    def named_step(self) -> str | None:
        """The step a phrase names (只抠图: ``idphoto-matte``), None for anything else."""
        if not self.names_job_only or len(self.tasks) != 1:
            return None
        task = next(iter(self.tasks))
        return task if _WHOLE_JOB[task] != task else None


class RuleInterpreter:
    """Reads prompts with a :class:`Vocabulary`; ``interpret_now`` is the synchronous form (start-up, the CLI)."""

    name = INTERPRETER

    def __init__(self, vocabulary: Vocabulary, context: JobContext, deadline_s: float = RULES_DEADLINE_S) -> None:
        self._vocabulary = vocabulary
        self._context = context
        self._deadline_s = deadline_s

    async def interpret(self, prompt: str, hint: JobHint | None = None) -> Instruction:
        """In a worker thread under ``deadline_s`` (503 past it): the event loop of the ingress stays free."""
        return await in_thread_within(self._deadline_s, "reading the prompt", self.interpret_now, prompt, hint)

    def interpret_now(self, prompt: str, hint: JobHint | None = None) -> Instruction:
        text = normalize(check_prompt(prompt))
        findings = _choose(self._proposals(text))
        task = _decide_task(findings, hint)
        fields, notes = _fields_for(task, findings, hint)
        notes += _apply_implied(self._vocabulary, task, fields)
        try:
            params = parse_job_params(task, fields, self._context)
        except InvalidParameter as exc:
            raise InvalidParameter(
                f"understood job {task} with {fields}, which it refuses: {exc.message}",
                details={**exc.details, "task": task, "params": fields, "notes": notes},
            ) from None
        return Instruction(task=task, params=params, interpreter=INTERPRETER, notes=tuple(notes))

    def _proposals(self, text: str) -> list[Finding]:
        vocabulary = self._vocabulary
        found = [
            Finding(
                match.start(), match.end(), match.group(0), phrase.tasks, phrase.values, phrase.reading, phrase.weak
            )
            for phrase in vocabulary.phrases
            for match in phrase.pattern.finditer(text)
        ]
        for name in vocabulary.numbers:
            for match in name.pattern.finditer(text):
                number = _number(match.group(1)) / (100 if match.group(2) else 1)
                found.append(Finding(match.start(), match.end(), match.group(0), name.tasks, {name.field: number}))
        for extract in _EXTRACTORS:
            for start, end, values, reading, weak in extract(text):
                tasks = _owners(vocabulary, values)
                if tasks is not None:
                    found.append(Finding(start, end, text[start:end], tasks, values, reading, weak))
        return found


def _owners(vocabulary: Vocabulary, values: Mapping[str, Any]) -> frozenset[str] | None:
    """The jobs that have every option in ``values``; None when no job has them all (the pattern does not apply)."""
    owners = frozenset(vocabulary.tasks)
    for name in values:
        owners &= vocabulary.field_tasks.get(name, frozenset())
    return owners or None


def _choose(proposals: Iterable[Finding]) -> list[Finding]:
    """Options and step names before job names (an option names its job too: "US passport" in "US passport photo"),
    then the longest (只抠图, a step, over 抠图, an option), then the leftmost; a proposal overlapping one already
    chosen is dropped. In prompt order."""
    chosen: list[Finding] = []  # disjoint, in prompt order: only the nearest one starting before an end can overlap
    starts: list[int] = []
    for finding in sorted(proposals, key=lambda f: (f.names_job_only and not f.named_step, -f.length, f.start)):
        at = bisect.bisect_left(starts, finding.end)
        if at == 0 or chosen[at - 1].end <= finding.start:
            chosen.insert(at, finding)
            starts.insert(at, finding.start)
    return chosen


def _decide_task(findings: list[Finding], hint: JobHint | None) -> str:
    task = hint.task if hint is not None else _named_task(findings)
    whole_job = _WHOLE_JOB[task]
    strays = [
        finding.text
        for finding in findings
        if finding.tasks and task not in finding.tasks and finding.tasks != {whole_job}  # 证件照 in 证件照只抠图
    ]
    if strays:
        raise InstructionUnclear(
            f"job {task} was chosen, but the prompt also asks for what it does not do: {', '.join(strays)}",
            details={"task": task, "not_for_this_job": strays},
        )
    return task


def _named_task(findings: list[Finding]) -> str:
    """The one whole job the findings name, or the one step of it a phrase names."""
    named: dict[str, list[str]] = {}
    steps: dict[str, list[str]] = {}
    for finding in findings:
        whole_jobs = {_WHOLE_JOB[task] for task in finding.tasks}
        if len(whole_jobs) == 1:
            named.setdefault(next(iter(whole_jobs)), []).append(finding.text)
        if finding.named_step:
            steps.setdefault(finding.named_step, []).append(finding.text)
    if len(named) == 1 and len(steps) <= 1:
        return next(iter(steps or named))
    if not named:
        raise InstructionUnclear(
            "the prompt names no job; ask for one of: "
            + "; ".join(f"{entry.title[0]} ({entry.example_words})" for entry in JOB_ENTRIES),
            details={"understood": [finding.text for finding in findings]},
        )
    several = steps if len(named) == 1 else named
    listed = "; ".join(f"{name} ({', '.join(texts)})" for name, texts in several.items())
    raise InstructionUnclear(
        f"the prompt asks for several jobs: {listed}. One job per request: send them one at a time",
        details={"tasks": several},
    )


def _fields_for(task: str, findings: list[Finding], hint: JobHint | None) -> tuple[dict[str, Any], list[str]]:
    """The options the findings set, in prompt order (a later mention replaces an earlier one), and notes saying
    where each came from."""
    named_by = [f'"{finding.text}"' for finding in findings if finding.names_job_only]
    if hint is not None:
        notes = [f"job {task}: chosen by the caller"]
    elif named_by:
        notes = [f"job {task}: named by {', '.join(named_by)}"]
    else:
        notes = [f"job {task}: the only job with the options asked for"]
    fields: dict[str, Any] = dict(hint.params) if hint else {}
    source = {name: "the caller's model" for name in fields}
    strong = {name for finding in findings if not finding.weak for name in finding.values}
    for finding in findings:
        if not finding.tasks and finding.reading:
            notes.append(f'ignored "{finding.text}": {finding.reading}')
        for name, value in finding.values.items() if finding.tasks else ():
            if finding.weak and name in strong:
                continue
            reading = f" ({finding.reading})" if finding.reading else ""
            replaced = f", replacing {source[name]}" if name in source and fields[name] != value else ""
            notes.append(f'{name} = {value} from "{finding.text}"{reading}{replaced}')
            fields[name] = value
            source[name] = f'"{finding.text}"'
    return fields, notes


def _apply_implied(vocabulary: Vocabulary, task: str, fields: dict[str, Any]) -> list[str]:
    notes = []
    for rule in vocabulary.implied:
        applies = all(fields.get(name) == value for name, value in rule.when.items())
        targets = {name: value for name, value in rule.then.items() if name not in fields}
        if applies and targets and all(name in vocabulary.models[task].model_fields for name in targets):
            fields.update(targets)
            notes.extend(f"{name} = {value}: {rule.because}" for name, value in targets.items())
    return notes


def _number(text: str) -> float | int:
    if text in _CN_DIGITS:
        return _CN_DIGITS[text]
    return float(text) if "." in text else int(text)


# --- number patterns ------------------------------------------------------------------------------------------------


class Extraction(NamedTuple):
    start: int
    end: int
    values: dict[str, Any]
    reading: str = ""
    weak: bool = False


def _found(match: re.Match[str], values: dict[str, Any], reading: str = "", weak: bool = False) -> Extraction:
    return Extraction(match.start(), match.end(), values, reading, weak)


def _upscale(text: str) -> Iterable[Extraction]:
    verb = r"(?:放大|超分辨率|超分|upscale|enlarge|scale up|upsample|magnify)"
    factor = rf"{_NUMBER}\s*(?:倍|x|×|times|fold)?"
    for match in re.finditer(rf"{verb}\s*(?:by|to|至|到|成|为)?\s*{factor}", text):
        if match.group(0).startswith("放大") and match.group(1) == "一" and "倍" in match.group(0):
            yield _found(match, {"upscale": 2}, "放大一倍 is twice the size")
        else:
            yield _found(match, {"upscale": _number(match.group(1))})
    for match in re.finditer(rf"{_NUMBER}\s*倍\s*(?:放大|超分)?", text):
        yield _found(match, {"upscale": _number(match.group(1))})
    for match in re.finditer(rf"{_EDGE_BEFORE}(\d+)\s*[x×]{_EDGE_AFTER}|{_EDGE_BEFORE}[x×]\s*(\d+){_EDGE_AFTER}", text):
        yield _found(match, {"upscale": int(match.group(1) or match.group(2))})
    for match in re.finditer(r"(?<![a-z])(?:double|twice|quadruple)(?:\s+(?:the\s+)?(?:size|resolution))?", text):
        yield _found(match, {"upscale": 4 if match.group(0).startswith("quad") else 2})
    for match in re.finditer(verb, text):
        yield _found(match, {"upscale": 2}, "no factor named: 2", weak=True)


def _kilobytes(number: str, unit: str) -> int:
    return round(float(number) * (1024 if unit in ("mb", "m", "兆") else 1))


def _file_size(text: str) -> Iterable[Extraction]:
    size = rf"{_RUN_START}(\d+(?:\.\d+)?)\s*{_KB_UNIT}"
    for match in re.finditer(rf"{_RUN_START}(\d+)\s*(?:kb|k)?\s*(?:-|~|到|至|to)\s*{size}", text):
        low, high, unit = match.group(1), match.group(2), match.group(3)
        yield _found(match, {"min_kb": _kilobytes(low, unit), "max_kb": _kilobytes(high, unit)})
    bounds = (("max_kb", _KB_AT_MOST, _KB_AT_MOST_AFTER), ("min_kb", _KB_AT_LEAST, _KB_AT_LEAST_AFTER))
    for limit, words, after in bounds:
        for match in re.finditer(rf"(?:{words})\s*{size}|{size}\s*(?:{after})", text):
            number, unit = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
            yield _found(match, {limit: _kilobytes(number, unit)})
    for match in re.finditer(rf"{_RUN_START}(\d+(?:\.\d+)?)\s*(kb|mb)(?![a-z])", text):
        yield _found(match, {"max_kb": _kilobytes(match.group(1), match.group(2))}, "read as an upper limit", weak=True)


def _size(text: str) -> Iterable[Extraction]:
    units = "|".join(sorted(map(re.escape, _SIZE_UNITS), key=len, reverse=True))
    pattern = rf"{_EDGE_BEFORE}(\d+(?:\.\d+)?)\s*[x×*]\s*(\d+(?:\.\d+)?)\s*(?:({units})(?![a-z]))?"
    for match in re.finditer(pattern, text):
        width, height, unit = float(match.group(1)), float(match.group(2)), match.group(3)
        reading = ""
        if unit is None:
            unit = "px" if min(width, height) >= _SMALLEST_PX else "mm"
            reading = f"no unit: read as {'pixels' if unit == 'px' else 'millimetres'}"
        if unit in ("px", "像素"):
            values = {"width_px": round(width), "height_px": round(height)}
        else:
            scale = _SIZE_UNITS[unit]
            values = {"width_mm": round(width * scale, 2), "height_mm": round(height * scale, 2)}
        yield _found(match, values, reading)


def _dpi(text: str) -> Iterable[Extraction]:
    for match in re.finditer(rf"{_RUN_START}(\d+)\s*dpi(?![a-z])", text):
        yield _found(match, {"dpi": int(match.group(1))})


def _hex_colour(text: str) -> Iterable[Extraction]:
    for match in re.finditer(r"#([0-9a-f]{6}|[0-9a-f]{3})(?![0-9a-z])", text):
        yield _found(match, {"background": match.group(0)})


_EXTRACTORS: tuple[Callable[[str], Iterable[Extraction]], ...] = (_upscale, _file_size, _size, _dpi, _hex_colour)
