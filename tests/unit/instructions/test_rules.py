"""The rule interpreter: how people write requests (Chinese and English) → one job with params its own model accepts;
requests that name no job, or several, are refused rather than guessed."""

from __future__ import annotations

import dataclasses
from typing import Literal

import pytest

from deployments.common.errors import InvalidParameter
from deployments.idphoto.specs import IdSpec
from deployments.restore.params import RestoreParams
from serve_app.instructions import MAX_PROMPT_CHARS, InstructionUnclear, JobHint, PromptTooLong, rule_interpreter
from serve_app.instructions.vocabulary import build_vocabulary, enum_values, load_lexicon
from serve_app.jobs import parse_job_params
from serve_app.registry import JOB_ENTRIES

BLUE, WHITE, RED = "#628bce", "#ffffff", "#d74532"

# (prompt, job, params as /v1/instructions answers them). Half Chinese, half English, as people type them.
PHRASINGS = [
    # --- ID photos, Chinese -----------------------------------------------------------------------------------------
    ("蓝底一寸证件照", "idphoto", {"spec": "cn-1inch", "background": BLUE}),
    ("帮我做一张白底二寸照片", "idphoto", {"spec": "cn-2inch", "background": WHITE}),
    ("小一寸红底", "idphoto", {"spec": "cn-1inch-small", "background": RED}),
    ("大一寸 蓝色背景", "idphoto", {"spec": "cn-1inch-large", "background": BLUE}),
    ("身份证照片", "idphoto", {"spec": "cn-id-card"}),
    ("四六级报名照，不超过50KB", "idphoto", {"spec": "cn-cet", "max_kb": 50}),
    ("申根签证照片", "idphoto", {"spec": "eu-schengen-visa"}),
    ("美国护照照片 白底", "idphoto", {"spec": "us-passport", "background": WHITE}),
    ("驾照照片", "idphoto", {"spec": "cn-driving-licence"}),
    (
        "考研报名照 蓝底 20-50KB",
        "idphoto",
        {"spec": "cn-postgraduate-exam", "background": BLUE, "min_kb": 20, "max_kb": 50},
    ),
    (
        "蓝底一寸，6寸相纸排版，带裁切线",
        "idphoto",
        {"spec": "cn-1inch", "background": BLUE, "layout": "6inch", "cut_lines": True},
    ),
    ("一寸照 文件大小1MB以内", "idphoto", {"spec": "cn-1inch", "max_kb": 1024}),
    ("背景色#ff0000的二寸照", "idphoto", {"spec": "cn-2inch", "background": "#ff0000"}),
    ("295x413像素的证件照", "idphoto", {"width_px": 295, "height_px": 413}),
    ("33×48毫米 白底证件照", "idphoto", {"width_mm": 33.0, "height_mm": 48.0, "background": WHITE}),
    ("透明背景的证件照", "idphoto", {"background": "transparent", "format": "png"}),
    ("把白底换成蓝底的一寸照", "idphoto", {"spec": "cn-1inch", "background": BLUE}),
    ("教资报名照片，白底，A4纸排版", "idphoto", {"spec": "cn-teacher-cert", "background": WHITE, "layout": "a4"}),
    ("港澳通行证照片 渐变背景", "idphoto", {"spec": "cn-hk-macau-permit", "render": "vertical"}),
    # --- ID photos, English ---------------------------------------------------------------------------------------
    ("US passport photo", "idphoto", {"spec": "us-passport"}),
    ("Make me a Schengen visa photo", "idphoto", {"spec": "eu-schengen-visa"}),
    ("UK passport photo, under 500 KB", "idphoto", {"spec": "uk-passport", "max_kb": 500}),
    ("ID photo with a blue background, 1 inch", "idphoto", {"spec": "cn-1inch", "background": BLUE}),
    (
        "2 inch ID photo on a white background, print sheet with cut lines",
        "idphoto",
        {"spec": "cn-2inch", "background": WHITE, "layout": "6inch", "cut_lines": True},
    ),
    (
        "passport photo 35x45 mm, white background",
        "idphoto",
        {"width_mm": 35.0, "height_mm": 45.0, "background": WHITE},
    ),
    ("Canadian passport photo, strict", "idphoto", {"spec": "ca-passport", "strict": True}),
    ("Chinese visa photo as PNG", "idphoto", {"spec": "cn-visa", "format": "png"}),
    ("US visa photo, background #FFF", "idphoto", {"spec": "us-visa", "background": WHITE}),
    # --- restoration, Chinese ---------------------------------------------------------------------------------------
    ("修复这张老照片并放大两倍", "restore", {"upscale": 2}),
    ("老照片修复", "restore", {}),
    ("黑白老照片修复，放大4倍", "restore", {"upscale": 4}),
    ("照片太模糊了，帮我变清晰", "restore", {}),
    ("放大一倍", "restore", {"upscale": 2}),
    ("用GPEN 256修复", "restore", {"model": "gpen-bfr-256"}),
    ("修复人脸，只修中间的人", "restore", {"only_center_face": True}),
    ("修复老照片，修复强度0.6", "restore", {"blend": 0.6}),
    pytest.param(
        "用codeformer修复，保真度0.7",
        "restore",
        {"model": "codeformer", "fidelity": 0.7},
        marks=pytest.mark.skipif("codeformer" not in enum_values(RestoreParams, "model"), reason="no CodeFormer here"),
    ),
    # --- restoration, English ---------------------------------------------------------------------------------------
    ("restore this photo and upscale 2x", "restore", {"upscale": 2}),
    ("Please repair my old photo", "restore", {}),
    ("4x upscale", "restore", {"upscale": 4}),
    ("enhance the face with gpen-bfr-512, output webp", "restore", {"model": "gpen-bfr-512", "format": "webp"}),
    ("fix this blurry picture, double the resolution", "restore", {"upscale": 2}),
    ("restore with blend 0.5, max_faces 3", "restore", {"blend": 0.5, "max_faces": 3}),
    ("restore an old black and white photo", "restore", {}),
    # --- cartoons, Chinese ------------------------------------------------------------------------------------------
    ("变成动漫风格", "cartoon", {"style": "anime"}),
    ("3D卡通头像", "cartoon", {"style": "3d"}),
    ("手绘风", "cartoon", {"style": "handdrawn"}),
    ("素描", "cartoon", {"style": "sketch"}),
    ("卡通化，输出jpg", "cartoon", {"format": "jpeg"}),
    # --- cartoons, English ------------------------------------------------------------------------------------------
    ("cartoonize me in 3D style", "cartoon", {"style": "3d"}),
    ("turn this into an anime style picture", "cartoon", {"style": "anime"}),
    ("make a pencil sketch of me", "cartoon", {"style": "sketch"}),
    ("hand-drawn cartoon please", "cartoon", {"style": "handdrawn"}),
    ("cartoon, art style", "cartoon", {"style": "artstyle"}),
]


PROMPTS = [entry.values[0] if isinstance(entry, type(pytest.param())) else entry[0] for entry in PHRASINGS]


def _has_chinese(text: str) -> bool:
    return any("\u4e00" <= char <= "\u9fff" for char in text)


def test_the_table_is_large_and_half_chinese():
    chinese = sum(_has_chinese(prompt) for prompt in PROMPTS)
    assert len(PROMPTS) >= 40
    assert chinese >= len(PROMPTS) / 2
    assert len(PROMPTS) - chinese >= 20


@pytest.mark.parametrize(("prompt", "task", "params"), PHRASINGS, ids=PROMPTS)
def test_a_phrasing_maps_to_its_job_and_params(rules, job_ctx, prompt, task, params):
    instruction = rules.interpret_now(prompt)
    assert (instruction.task, instruction.fields()) == (task, params)
    assert instruction.interpreter == "rules"
    # What the answer says validates again, unchanged, through the job's own model (what POST /v1/{task} does).
    assert parse_job_params(task, instruction.fields(), job_ctx) == instruction.params


def test_notes_say_which_words_set_what(rules):
    notes = rules.interpret_now("蓝底一寸证件照").notes
    assert notes == ('job idphoto: named by "证件照"', 'background = blue from "蓝底"', 'spec = cn-1inch from "一寸"')
    assert rules.interpret_now("放大").notes[-1] == 'upscale = 2 from "放大" (no factor named: 2)'
    assert 'replacing "白底"' in rules.interpret_now("把白底换成蓝底的一寸照").notes[2]


UNCLEAR = ["hello", "帮我做个头像", "make it nicer", "PNG please", "max faces 3", "这是什么", "把照片发给我"]


@pytest.mark.parametrize("prompt", UNCLEAR)
def test_a_prompt_naming_no_job_is_refused_not_guessed(rules, prompt):
    with pytest.raises(InstructionUnclear, match="names no job") as refused:
        rules.interpret_now(prompt)
    assert (refused.value.code, refused.value.http_status) == ("instruction_unclear", 422)


SEVERAL = [
    ("修复这张老照片再做成证件照", {"restore", "idphoto"}),
    ("蓝底卡通头像", {"idphoto", "cartoon"}),
    ("restore it and cartoonize it", {"restore", "cartoon"}),
    ("一寸照片，放大两倍", {"idphoto", "restore"}),
]


@pytest.mark.parametrize(("prompt", "tasks"), SEVERAL)
def test_a_prompt_naming_several_jobs_is_refused(rules, prompt, tasks):
    with pytest.raises(InstructionUnclear, match="several jobs") as refused:
        rules.interpret_now(prompt)
    assert set(refused.value.details["tasks"]) == tasks


def test_a_chosen_job_takes_options_from_the_prompt_and_refuses_another_jobs_options(rules):
    chosen = rules.interpret_now("白底", JobHint("idphoto"))
    assert (chosen.task, chosen.fields(), chosen.notes[0]) == (
        "idphoto",
        {"background": WHITE},
        "job idphoto: chosen by the caller",
    )
    assert rules.interpret_now("just do it", JobHint("cartoon", {"style": "sketch"})).fields() == {"style": "sketch"}
    assert rules.interpret_now("3D", JobHint("cartoon", {"style": "sketch"})).fields() == {"style": "3d"}
    with pytest.raises(InstructionUnclear, match="does not do: 蓝底"):
        rules.interpret_now("蓝底", JobHint("cartoon"))


@pytest.mark.parametrize(
    ("prompt", "problem"),
    [
        ("放大3倍", "upscale"),  # understood, but the job offers 1, 2 or 4
        ("一寸照 600dpi", "dpi applies to a custom size"),  # 300 is the default: a dump of the params says it
        ("一寸照 295x413像素", "exclude each other"),
        ("证件照 10-5KB", "must not exceed"),
    ],
)
def test_options_the_job_refuses_are_a_clear_422(rules, prompt, problem):
    with pytest.raises(InvalidParameter, match=problem) as refused:
        rules.interpret_now(prompt)
    assert refused.value.code == "invalid_parameter"
    assert "understood job" in refused.value.message


@pytest.mark.parametrize("prompt", ["", "   \n", None, 42])
def test_an_empty_or_non_text_prompt_is_refused(rules, prompt):
    with pytest.raises(InvalidParameter, match="prompt"):
        rules.interpret_now(prompt)


def test_a_10_kb_prompt_is_refused_before_reading(rules):
    with pytest.raises(PromptTooLong) as refused:
        rules.interpret_now("蓝底一寸证件照" * 1500)
    assert (refused.value.code, refused.value.http_status) == ("prompt_too_long", 413)
    assert refused.value.details["max_chars"] == MAX_PROMPT_CHARS


def test_full_width_characters_read_like_ascii(rules):
    assert rules.interpret_now("修复，放大２倍，ｐｎｇ").fields() == {"upscale": 2, "format": "png"}


# --- the vocabulary is data ------------------------------------------------------------------------------------------


def test_a_preset_added_to_the_standards_is_recognised_by_its_names(job_ctx):
    base = job_ctx.id_specs["cn-1inch"]
    extra = dataclasses.replace(base, slug="xx-club-card", name="俱乐部卡", name_en="Club card", aliases=("会员卡",))
    context = dataclasses.replace(job_ctx, id_specs={**job_ctx.id_specs, "xx-club-card": extra})
    rules = rule_interpreter(context)
    assert rules.interpret_now("会员卡照片 白底").fields() == {"spec": "xx-club-card", "background": WHITE}
    assert rules.interpret_now("club card photo").fields() == {"spec": "xx-club-card"}


def test_a_model_added_to_the_params_model_appears_in_the_vocabulary(job_ctx):
    class WiderRestoreParams(RestoreParams):
        model: Literal["gpen-bfr-512", "newnet-v2"] | None = None
        strength_of_magic: float | None = None

    jobs = {entry.name: entry for entry in JOB_ENTRIES}
    jobs["restore"] = dataclasses.replace(jobs["restore"], params_model=WiderRestoreParams)
    vocabulary = build_vocabulary(job_ctx, jobs=jobs)
    meanings = {phrase.text: dict(phrase.values) for phrase in vocabulary.phrases if phrase.tasks == {"restore"}}
    assert meanings["newnet-v2"] == meanings["newnet"] == {"model": "newnet-v2"}
    assert meanings["gpen"] == {"model": "gpen-bfr-512"}
    number = next(name for name in vocabulary.numbers if name.field == "strength_of_magic")
    assert number.tasks == {"restore"} and number.pattern.search("strength of magic 0.3").group(1) == "0.3"


def test_a_lexicon_entry_for_an_option_no_job_has_is_left_out(job_ctx):
    lexicon = dataclasses.replace(
        load_lexicon(), options={"glitter": {True: ("闪光",)}, "style": {"pixar": ("皮克斯",)}}
    )
    vocabulary = build_vocabulary(job_ctx, lexicon)
    assert not [phrase for phrase in vocabulary.phrases if phrase.text in ("闪光", "皮克斯")]


def test_every_lexicon_option_is_a_value_its_jobs_accept(job_ctx):
    vocabulary = build_vocabulary(job_ctx)
    # what an option goes with (the lexicon's ``implied`` adds the suit to a suit's colour)
    companions = {
        "cut_lines": {"layout": "6inch"},
        "background": {"format": "png"},
        "attire_color": {"attire": "suit-tie"},
    }
    checked = 0
    for phrase in vocabulary.phrases:
        for name, value in phrase.values.items():
            for task in phrase.tasks:
                fields = {**companions.get(name, {}), name: value}
                if name == "background" and value != "transparent":
                    fields = {name: value}
                parse_job_params(task, fields, job_ctx)
                checked += 1
    assert checked > 200


def test_a_job_in_the_lexicon_that_the_registry_lacks_fails_loudly(job_ctx):
    lexicon = dataclasses.replace(load_lexicon(), tasks={**load_lexicon().tasks, "teleport": ("传送",)})
    with pytest.raises(Exception, match="teleport"):
        build_vocabulary(job_ctx, lexicon)


def test_the_shipped_presets_all_have_a_chinese_name_people_can_write(job_ctx):
    rules = rule_interpreter(job_ctx)
    for slug, spec in job_ctx.id_specs.items():
        assert isinstance(spec, IdSpec)
        assert rules.interpret_now(f"{spec.name}证件照").fields()["spec"] == slug
