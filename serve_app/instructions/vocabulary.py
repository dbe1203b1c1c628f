"""What the rule interpreter can recognise, built from data: the job registry's parameter models, the ID-photo
presets and cartoon styles of the ``JobContext``, and the phrase list ``lexicon.yaml``.

Nothing here lists a preset, a style or a model by name: a preset added to ``configs/id_specs.yaml``, a style added
to the manifest or a model added to ``RestoreParams.model`` is recognised by its own name with no code change (a
model its job refuses on its own, without other options, is not), and a lexicon entry for an option the running
service lacks is left out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from deployments.common.errors import InternalError
from deployments.common.params import JobParams
from deployments.edit.looks import default_looks
from deployments.portrait.styles import default_styles
from serve_app.jobs import JobContext
from serve_app.registry import JOB_ENTRIES, JobEntry

LEXICON_PATH = Path(__file__).with_name("lexicon.yaml")
_ASCII_WORD = re.compile(r"[a-z0-9]")
_SEPARATORS = re.compile(r"[\s_\-]+")
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Implied:
    """Options that come with others: ``then`` is set when every ``when`` value was asked for and ``then`` was not."""

    when: Mapping[str, Any]
    then: Mapping[str, Any]
    because: str


@dataclass(frozen=True)
class Lexicon:
    """``lexicon.yaml``: job phrases, option phrases (field -> value -> phrases), default-value phrases, number names,
    phrases to ignore, implied options."""

    tasks: Mapping[str, tuple[str, ...]]
    options: Mapping[str, Mapping[Any, tuple[str, ...]]]
    defaults: Mapping[str, Mapping[Any, tuple[str, ...]]]
    numbers: Mapping[str, tuple[str, ...]]
    ignore: tuple[str, ...]
    implied: tuple[Implied, ...] = ()


@dataclass(frozen=True)
class Phrase:
    """A phrase and what it means: a job (no ``values``), an option value for the jobs that have that option, or
    nothing (``tasks`` empty; ``reading`` then says why, when it names an option this service lacks)."""

    text: str
    tasks: frozenset[str]
    pattern: re.Pattern[str]
    values: Mapping[str, Any] = field(default_factory=dict)
    reading: str = ""
    weak: bool = False  # asks for an option without naming its value: yields to a phrase that names one


@dataclass(frozen=True)
class NumberName:
    """How people name a numeric option; ``pattern`` captures the number that follows the name."""

    field: str
    tasks: frozenset[str]
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Vocabulary:
    phrases: tuple[Phrase, ...]
    numbers: tuple[NumberName, ...]
    field_tasks: Mapping[str, frozenset[str]]  # option -> the jobs whose parameter model has it
    tasks: tuple[str, ...]
    models: Mapping[str, type[JobParams]]  # job -> its parameter model
    implied: tuple[Implied, ...] = ()


def normalize(text: str) -> str:
    """The form prompts and phrases are matched in: NFKC (full-width digits and letters become ASCII), lower case,
    each run of whitespace one space (so every ``\\s*`` of a pattern matches at most one character: no run of
    spaces or tabs can make two adjacent ones backtrack against each other)."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text).lower())


def phrase_pattern(text: str) -> re.Pattern[str]:
    """Match ``text`` in a normalized prompt: whole words at ASCII edges, spaces/hyphens/underscores interchangeable."""
    words = [re.escape(word) for word in _SEPARATORS.split(normalize(text).strip()) if word]
    body = r"[\s_\-]*".join(words)
    start = r"(?<![a-z0-9])" if _ASCII_WORD.match(words[0][0]) else ""
    end = r"(?![a-z0-9])" if _ASCII_WORD.match(words[-1][-1]) else ""
    return re.compile(start + body + end)


def enum_values(model: type[JobParams], field: str) -> tuple[Any, ...]:
    """The ``Literal`` values of ``field`` in ``model``'s JSON schema (also inside ``anyOf``); empty when not one."""
    schema = model.model_json_schema(by_alias=True).get("properties", {}).get(field)
    if schema is None:
        return ()
    values: list[Any] = []
    for part in [schema, *schema.get("anyOf", [])]:
        values.extend(part.get("enum", ()))
        if "const" in part:
            values.append(part["const"])
    return tuple(dict.fromkeys(values))


def numeric_fields(model: type[JobParams]) -> tuple[str, ...]:
    """Options that take a free number (not a ``Literal``): ``max_faces``, ``blend``, ``dpi``..."""
    names = []
    for name, schema in model.model_json_schema(by_alias=True).get("properties", {}).items():
        types = {part.get("type") for part in [schema, *schema.get("anyOf", [])]}
        if types & {"number", "integer"} and not enum_values(model, name):
            names.append(name)
    return tuple(names)


@lru_cache(maxsize=4)
def load_lexicon(path: Path = LEXICON_PATH) -> Lexicon:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return Lexicon(
        tasks={task: tuple(map(str, phrases)) for task, phrases in raw["tasks"].items()},
        options=_option_phrases(raw["options"]),
        defaults=_option_phrases(raw.get("defaults", {})),
        numbers={field: tuple(map(str, names)) for field, names in raw["numbers"].items()},
        ignore=tuple(map(str, raw.get("ignore", ()))),
        implied=tuple(Implied(rule["if"], rule["then"], rule["because"]) for rule in raw.get("implied", ())),
    )


def _option_phrases(raw: Mapping[str, Mapping[Any, list[Any]]]) -> dict[str, dict[Any, tuple[str, ...]]]:
    return {name: {value: tuple(map(str, texts)) for value, texts in values.items()} for name, values in raw.items()}


def build_vocabulary(
    context: JobContext, lexicon: Lexicon | None = None, jobs: Mapping[str, JobEntry] | None = None
) -> Vocabulary:
    lexicon = lexicon or load_lexicon()
    jobs = jobs or {entry.name: entry for entry in JOB_ENTRIES}
    unknown = set(lexicon.tasks) - set(jobs)
    if unknown:
        raise InternalError(f"lexicon names jobs the registry lacks: {sorted(unknown)}")
    models = {task: entry.params_model for task, entry in jobs.items()}
    field_tasks = _field_tasks(models)
    phrases: list[Phrase] = []

    def add(texts: Iterable[str], tasks: frozenset[str], values: Mapping[str, Any], reading: str = "", weak=False):
        for text in dict.fromkeys(texts):
            phrases.append(Phrase(normalize(text), tasks, phrase_pattern(text), values, reading, weak))

    for task, texts in lexicon.tasks.items():
        add(texts, frozenset({task}), {})
    add(lexicon.ignore, frozenset(), {})
    for weak, options in ((False, lexicon.options), (True, lexicon.defaults)):
        for name, values in options.items():
            for value, texts in values.items():
                tasks = _accepting(models, context, name, value)
                if tasks:
                    add(texts, tasks, {name: value}, f"no {name} named: {value}" if weak else "", weak)
    for name, texts in lexicon.numbers.items():
        if name not in field_tasks:
            add(texts, frozenset(), {}, f"{name} is not an option of this service")
    if "spec" in field_tasks:
        for slug, spec in context.id_specs.items():
            add([slug, spec.name, spec.name_en, *spec.aliases], field_tasks["spec"], {"spec": slug})
    if "look" in field_tasks:
        for name, look in default_looks().items():
            add([name, look.title_zh, look.title_en, *look.words], field_tasks["look"], {"look": name})
    if "style" in field_tasks:
        for style in context.cartoon_styles:
            add([style], _accepting(models, context, "style", style), {"style": style})
        for name, portrait in default_styles().items():
            texts = [name, portrait.title_zh, portrait.title_en, *portrait.words]
            add(texts, _accepting(models, context, "style", name), {"style": name})
    for task, model in models.items():
        for alias, model_id in _model_aliases(model).items():
            if _valid_alone(model, "model", model_id):  # not the edit's external endpoint: it needs a prompt too
                add([alias], frozenset({task}), {"model": model_id})
    numbers = [
        NumberName(field, field_tasks[field], _number_pattern([field, *lexicon.numbers.get(field, ())]))
        for field in dict.fromkeys(name for model in models.values() for name in numeric_fields(model))
    ]
    return Vocabulary(tuple(phrases), tuple(numbers), field_tasks, tuple(jobs), models, lexicon.implied)


def _field_tasks(models: Mapping[str, type[JobParams]]) -> dict[str, frozenset[str]]:
    owners: dict[str, set[str]] = {}
    for task, model in models.items():
        for name in model.model_json_schema(by_alias=True).get("properties", {}):
            owners.setdefault(name, set()).add(task)
    return {name: frozenset(tasks) for name, tasks in owners.items()}


def _accepting(models: Mapping[str, type[JobParams]], context: JobContext, name: str, value: Any) -> frozenset[str]:
    """The jobs whose ``name`` option takes ``value``: its ``Literal`` values, or the context's presets and styles
    (``webp`` is a format of restore and cartoon, not of an ID photo)."""
    from_context = {"spec": tuple(context.id_specs), "style": context.cartoon_styles}
    accepting = set()
    for task, model in models.items():
        if name not in model.model_json_schema(by_alias=True).get("properties", {}):
            continue
        choices = enum_values(model, name) or from_context.get(name)  # a Literal field's own values first
        if not choices or value in choices:
            accepting.add(task)
    return frozenset(accepting)


def _valid_alone(model: type[JobParams], name: str, value: Any) -> bool:
    """Whether ``model`` takes ``{name: value}`` with every other option at its default."""
    try:
        model.model_validate({name: value})
    except ValidationError:
        return False
    return True


def _model_aliases(model: type[JobParams]) -> dict[str, str]:
    """Names for each value of a job's ``model`` option: the id, its family (``gpen``: the default model when it is one
    of the family, else the first), and family plus size or version (``gpen 256``)."""
    ids = enum_values(model, "model")
    if not ids:
        return {}
    default = model.model_fields["model"].default
    aliases: dict[str, str] = {}
    for model_id in ids:
        tokens = str(model_id).split("-")
        family = tokens[0]
        aliases[str(model_id)] = model_id
        if len(tokens) > 1:
            aliases.setdefault(f"{family} {tokens[-1]}", model_id)
        if family not in aliases or model_id == default:
            aliases[family] = model_id
    return aliases


def _number_pattern(names: Iterable[str]) -> re.Pattern[str]:
    """``<name> [=:为是 to of] <number>[%]``, any of the names, longest first."""
    bodies = sorted({phrase_pattern(name).pattern for name in names}, key=len, reverse=True)
    joiner = r"\s*(?:=|:|为|是|设为|设置为|调到|调成|to|of|at)?\s*"
    return re.compile(rf"(?:{'|'.join(bodies)}){joiner}(\d+(?:\.\d+)?)\s*(%?)")
