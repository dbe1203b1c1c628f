"""The report's words in English and Chinese: reasons, advice and notes, chosen by ``lang`` or ``Accept-Language``.

A mini-program shows its user why a photo fails; that user reads Chinese more often than not. Each text has a
stable key (also returned as ``reason_codes``, for programs) and a template per language.
"""

from __future__ import annotations

import re
from typing import Literal

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")
DEFAULT_LANG: Lang = "en"

TEXTS: dict[str, dict[Lang, str]] = {
    "out_of_range": {
        "en": "{label} is {value} {unit}, outside [{low}, {high}]",
        "zh": "{label}为 {value} {unit}，不在 [{low}, {high}] 范围内",
    },
    "not_measured": {"en": "{label}: could not be measured", "zh": "{label}：无法测量"},
    "face_count": {
        "en": "{count} faces found; this photo needs exactly {needed} (the largest {used} used)",
        "zh": "检测到 {count} 张人脸；此照片需要恰好 {needed} 张（已使用最大的 {used} 张）",
    },
    "head_cropped_in_source": {
        "en": "the source photo cuts the head at its {edges} edge: an ID photo needs the whole head and hair "
        "with space around them",
        "zh": "原照片在{edges}边缘截断了头部：证件照需要完整的头部和头发，且四周留有空白",
    },
    "shoulders_cropped_in_source": {
        "en": "the source photo cuts the shoulders: an ID photo shows them down to its bottom edge",
        "zh": "原照片截断了肩膀：证件照需要肩膀一直延伸到照片下边缘",
    },
    "crown_visible": {
        "en": "the top of the head touches the photo's top edge",
        "zh": "头顶碰到了照片的上边缘",
    },
    "file_size": {
        "en": "file size {size_kb} KB outside [{min_kb}, {max_kb}] KB (bytes are never padded)",
        "zh": "文件大小 {size_kb} KB 不在 [{min_kb}, {max_kb}] KB 范围内（不会用填充字节凑大小）",
    },
    "attire_seam_gap": {
        "en": "the new clothes leave a gap of {gap} eye distances between the neck and the collar, where the "
        "background or the old clothes show",
        "zh": "新衣服的领口与脖子之间留有 {gap} 个眼距的缝隙，露出了背景或原来的衣服",
    },
    "attire_covers_chin": {"en": "the new clothes cover the chin", "zh": "新衣服遮住了下巴"},
    "advice_retake_head": {
        "en": "Retake the photo from further away, with the whole head, the hair and some space above it in view.",
        "zh": "请离远一些重拍，让整个头部、头发以及头顶上方的空白都在画面内。",
    },
    "advice_retake_shoulders": {
        "en": "Retake the photo with both shoulders fully in view.",
        "zh": "请重拍，让双肩完整地出现在画面内。",
    },
    "advice_faces": {
        "en": "Use a photo with exactly {needed} face(s) looking at the camera.",
        "zh": "请使用恰好有 {needed} 张正对镜头人脸的照片。",
    },
    "advice_attire": {
        "en": "Try another attire template, or a photo that shows the neck down to the collarbones.",
        "zh": "请换一种服装模板，或使用露出脖子直到锁骨的照片。",
    },
    # The compliance gate's refusals (deployments/compliance/verdict.py): ``refused_<code>`` and ``advice_<code>``.
    "refused_explicit_content": {"en": "the photo shows nudity", "zh": "照片含有裸露内容"},
    "advice_explicit_content": {"en": "Use a photo of the person fully clothed.", "zh": "请使用衣着完整的照片。"},
    "refused_not_a_photo": {
        "en": "this is not a real photograph (a drawing, painting, render or generated image)",
        "zh": "这不是真实拍摄的照片（绘画、渲染图或生成的图像）",
    },
    "advice_not_a_photo": {
        "en": "Use a photo of the person taken with a camera.",
        "zh": "请使用相机直接拍摄的本人照片。",
    },
    "refused_photo_of_screen": {
        "en": "this is a photo of a screen or of a printed photo",
        "zh": "这是翻拍屏幕或纸质照片得到的图像",
    },
    "advice_photo_of_screen": {
        "en": "Photograph the person directly, not a screen or a print.",
        "zh": "请直接拍摄本人，不要翻拍屏幕或纸质照片。",
    },
    "refused_not_a_person": {
        "en": "the photo does not show a living person (a statue, mannequin, doll, mask or animal)",
        "zh": "照片中不是真人（雕像、人体模型、玩偶、面具或动物）",
    },
    "advice_not_a_person": {"en": "Use a photo of a real, living person.", "zh": "请使用真人照片。"},
    "refused_face_count": {
        "en": "{count} faces found; this needs exactly one",
        "zh": "检测到 {count} 张人脸；此处需要恰好一张",
    },
    "refused_eyes_not_visible": {
        "en": "the eyes are not both open and visible",
        "zh": "双眼没有都睁开且清晰可见",
    },
    "advice_eyes_not_visible": {
        "en": "Look at the camera with both eyes open and nothing over them (hair, a hat, hands).",
        "zh": "请睁开双眼正视镜头，不要让头发、帽子或手遮挡眼睛。",
    },
    "refused_sunglasses": {
        "en": "the person wears sunglasses or tinted glasses",
        "zh": "佩戴了墨镜或有色眼镜",
    },
    "advice_sunglasses": {"en": "Take off sunglasses or tinted glasses.", "zh": "请摘下墨镜或有色眼镜。"},
    "refused_face_covered": {
        "en": "the face is covered (a mask, scarf, hand or hair)",
        "zh": "面部被遮挡（口罩、围巾、手或头发）",
    },
    "advice_face_covered": {
        "en": "Show the whole face, from the hairline to the chin.",
        "zh": "请露出从发际线到下巴的整个面部。",
    },
    "refused_minor": {
        "en": "the person appears to be under 18: generative edits are not made of minors",
        "zh": "照片中的人看起来未满 18 岁：不对未成年人进行生成式编辑",
    },
    "advice_minor": {
        "en": "Generative edits need a photo of an adult.",
        "zh": "生成式编辑只接受成年人的照片。",
    },
    "note_rotated": {"en": "eye line levelled (was {deg} deg)", "zh": "已将双眼连线调平（原倾斜 {deg} 度）"},
    "note_upsampled": {
        "en": "upsampled x{scale}: the source has fewer pixels than the output needs",
        "zh": "已放大 {scale} 倍：原照片的像素少于输出所需",
    },
    "note_beyond_source": {
        "en": "{share} of the photo lies beyond the source: it is background there",
        "zh": "照片有 {share} 的区域超出原照片范围：该处为背景色",
    },
    "note_crown_clipped": {
        "en": "the crop starts inside the source so the cut hair leaves the frame instead of ending in a line",
        "zh": "裁剪从原照片内部开始，使被截断的头发自然延伸出画面，而不是以一条直线结束",
    },
    "note_crown_estimated": {
        "en": "crown estimated from face proportions (segmentation missed the head)",
        "zh": "头顶位置按面部比例估算（抠图未覆盖头部）",
    },
    "note_lighting_gentle": {
        "en": "exposure of the face brought into range (colours kept)",
        "zh": "已校正面部曝光（保留原有肤色）",
    },
    "note_lighting_full": {
        "en": "white balance and lighting evened out (lighting=full)",
        "zh": "已进行白平衡和光照均衡（lighting=full）",
    },
    "note_touched_up": {"en": "touched up (person only): {sliders}", "zh": "已美颜（仅人物）：{sliders}"},
    "note_mirrored": {"en": "mirrored (horizontal_flip)", "zh": "已水平翻转（horizontal_flip）"},
}

LABELS: dict[str, dict[Lang, str]] = {
    "face_count": {"en": "face count", "zh": "人脸数量"},
    "head_height_ratio": {
        "en": "head height (crown to chin) / photo height",
        "zh": "头部高度（头顶到下巴）占照片高度比例",
    },
    "top_margin_ratio": {"en": "top margin (edge to crown) / photo height", "zh": "头顶到上边缘距离占照片高度比例"},
    "eye_tilt_deg": {"en": "eye line tilt", "zh": "双眼连线倾斜"},
    "horizontal_offset": {"en": "face offset from the centre / photo width", "zh": "面部偏离中线距离占照片宽度比例"},
    "sharpness": {"en": "face sharpness", "zh": "面部清晰度"},
    "source_scale": {"en": "enlargement of the source", "zh": "原照片放大倍数"},
    "edge_padding": {"en": "share beyond the source (top and bottom)", "zh": "超出原照片范围的比例（上下）"},
    "background_uniformity": {"en": "background uniformity", "zh": "背景均匀度"},
    "attire_seam_gap": {"en": "gap between the neck and the new collar", "zh": "脖子与新衣领之间的缝隙"},
    "attire_covers_chin": {"en": "space between the chin and the new clothes", "zh": "下巴与新衣服之间的距离"},
}

EDGES: dict[str, dict[Lang, str]] = {
    "top": {"en": "top", "zh": "上"},
    "bottom": {"en": "bottom", "zh": "下"},
    "left": {"en": "left", "zh": "左"},
    "right": {"en": "right", "zh": "右"},
}
_AND: dict[Lang, str] = {"en": " and ", "zh": "、"}
_Q = re.compile(r"^q=([01](?:\.\d{0,3})?)$")


def say(lang: Lang, key: str, **values: object) -> str:
    """The text ``key`` in ``lang`` with ``values`` filled in."""
    return TEXTS[key][lang].format(**values)


def label(lang: Lang, name: str) -> str:
    """A check's name in words (the name itself when it has no label)."""
    return LABELS.get(name, {}).get(lang, name)


def edges(lang: Lang, names: tuple[str, ...] | list[str]) -> str:
    return _AND[lang].join(EDGES[name][lang] for name in names)


def pick_lang(value: str | None) -> Lang:
    """``en``/``zh`` from a ``lang`` value or an ``Accept-Language`` header (``zh-CN,zh;q=0.9,en;q=0.8``):
    the highest-weighted language we have; English when none."""
    best: tuple[float, Lang] | None = None
    for position, part in enumerate((value or "").split(",")):
        tag, _, rest = part.strip().partition(";")
        weight = _Q.match(rest.strip())
        primary = tag.strip().lower().split("-")[0]
        score = (float(weight.group(1)) if weight else 1.0) - position * 1e-6
        if primary in LANGS and score > 0 and (best is None or score > best[0]):
            best = (score, primary)  # type: ignore[assignment]
    return best[1] if best is not None else DEFAULT_LANG
