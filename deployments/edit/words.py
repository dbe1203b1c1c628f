"""What an edit's prompt says, by rules over its words (zh and en), no model: which look it asks for
(``look_from_prompt``), and whether it is an edit the service refuses (``refuse_edit``).

The refusal policy (``docs/api.md``, "Edit"): a request to change a person's ethnicity or apparent race, to make a
child look older, or to sexualise a child — or to undress anyone — is refused with 422 ``instruction_refused`` and
its reason in English and Chinese, whatever engine would run it. Rules, not a model: they read the words, so they
refuse a request that says so and never guess at one that does not.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from deployments.common.errors import InstructionRefused
from deployments.edit.looks import Look


def normalize(text: str) -> str:
    """NFKC, lower case, whitespace runs as one space (full-width letters read as ASCII)."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).lower())


def _word_pattern(word: str) -> re.Pattern[str]:
    """``word`` in a normalized prompt: whole words at ASCII edges, spaces, hyphens and underscores interchangeable."""
    parts = [re.escape(part) for part in re.split(r"[\s_\-]+", normalize(word).strip()) if part]
    body = r"[\s_\-]*".join(parts)
    start = r"(?<![a-z0-9])" if re.match(r"[a-z0-9]", parts[0][0]) else ""
    end = r"(?![a-z0-9])" if re.match(r"[a-z0-9]", parts[-1][-1]) else ""
    return re.compile(start + body + end)


def look_from_prompt(prompt: str, looks: Mapping[str, Look]) -> str | None:
    """The look whose word (its slug, titles or ``words``) is the longest match in ``prompt``; None when none is."""
    text = normalize(prompt)
    best: tuple[int, int, str] | None = None  # (length, -order, look)
    for order, (name, look) in enumerate(looks.items()):
        for word in (name, look.title_zh, look.title_en, *look.words):
            match = _word_pattern(word).search(text)
            if match and (best is None or (len(match.group(0)), -order) > best[:2]):
                best = (len(match.group(0)), -order, name)
    return None if best is None else best[2]


# --- the refusal policy ---------------------------------------------------------------------------------------------

_CHANGE = (
    r"(变成|变为|改成|改为|换成|转成|看起来像|看着像|像个?|弄成|p成|修成|make (?:me|him|her|them|it|this|the \w+)? ?"
    r"(?:look )?(?:like )?(?:an? )?|turn (?:me|him|her|them|it|this)? ?into (?:an? )?|into (?:an? )?|as (?:an? )?|"
    r"look (?:like )?(?:an? )?|change (?:\w+ )?to (?:an? )?|more )"
)
_GROUP = (
    r"(白人|黑人|黄种人|亚洲人|亚裔|欧洲人|欧美人|非洲人|非裔|印度人|阿拉伯人|拉丁裔|混血儿?|外国人|老外|洋人|中国人|日本人|韩国人|"
    r"white (?:person|man|woman|guy|girl)|black (?:person|man|woman|guy|girl)|caucasian|asian|african|european|"
    r"latino|latina|hispanic|arab|indian|mixed[ -]race|chinese|japanese|korean)"
)
_RACE_WORDS = (
    r"(人种|种族|肤色改|改肤色|换肤色|改变肤色|换个肤色|race swap|"
    r"change (?:my |his |her |their |the )?(?:race|ethnicity)|"
    r"different (?:race|ethnicity)|another (?:race|ethnicity)|skin colou?r to (?:white|black)|race change|ethnicity)"
)
_MINOR = (
    r"(?<![a-z])(孩子|小孩|儿童|幼儿|小朋友|宝宝|婴儿|未成年|少年|少女|小女孩|小男孩|女童|男童|萝莉|正太|初中生|小学生|"
    r"child|children|kid|kids|minor|underage|under-age|toddler|baby|teen|teenager|schoolgirl|schoolboy|little girl|"
    r"little boy|loli|preteen)(?![a-z])"
)
_OLDER = r"(变老|老一点|显老|成熟|长大|成年|成人|大人|older|aged? up|grown[ -]up|adult|mature)"
_SEXUAL = (
    r"(性感|诱惑|色情|暴露|撩人|挑逗|情趣|内衣|比基尼|泳装|裸|脱衣|sexy|seductive|sexual|sexualis|sexualiz|erotic|nsfw|"
    r"lingerie|bikini|nude|naked|undress|topless|provocative)"
)
_UNDRESS = (
    r"(裸体|裸照|全裸|脱光|脱掉衣服|去掉衣服|nude|naked|undress|topless|without clothes|"
    r"remove (?:her |his |the )?clothes)"
)

_RULES: tuple[tuple[str, re.Pattern[str], str, str], ...] = (
    (
        "change_ethnicity",
        re.compile(_RACE_WORDS + "|" + _CHANGE + _GROUP),
        "changing a person's ethnicity or apparent race is not an edit this service makes",
        "本服务不改变人物的种族或外观上的族裔",
    ),
    (
        "minor_older",
        re.compile(_MINOR + r".{0,24}?" + _OLDER + "|" + _OLDER + r".{0,24}?" + _MINOR),
        "making a child look older is not an edit this service makes",
        "本服务不把未成年人修改得显得更年长",
    ),
    (
        "minor_sexualised",
        re.compile(_MINOR + r".{0,24}?" + _SEXUAL + "|" + _SEXUAL + r".{0,24}?" + _MINOR),
        "sexualising a child is never an edit this service makes",
        "本服务绝不对未成年人做任何性化处理",
    ),
    (
        "undress",
        re.compile(_UNDRESS),
        "undressing a person is not an edit this service makes",
        "本服务不做去除衣物或裸露的编辑",
    ),
)


def refusal_reason(prompt: str) -> tuple[str, str, str] | None:
    """``(code, English, Chinese)`` of the first rule ``prompt`` breaks; None when it breaks none."""
    text = normalize(prompt)
    for code, pattern, reason_en, reason_zh in _RULES:
        if pattern.search(text):
            return code, reason_en, reason_zh
    return None


def refuse_edit(prompt: str | None) -> None:
    """Raise 422 ``instruction_refused`` (``details``: ``reason_code``, ``reason_en``, ``reason_zh``) when ``prompt``
    asks for an edit the policy refuses."""
    if not prompt:
        return
    reason = refusal_reason(prompt)
    if reason is not None:
        code, reason_en, reason_zh = reason
        raise InstructionRefused(
            f"{reason_en} ({reason_zh})", details={"reason_code": code, "reason_en": reason_en, "reason_zh": reason_zh}
        )
