"""Style requests in words reach the edit job with a sensible look and scope (the rule interpreter), and the edit
refusal policy holds for every interpreter (``check_prompt``: 422 ``instruction_refused``)."""

from __future__ import annotations

import pytest

from deployments.common.errors import InstructionRefused


@pytest.mark.parametrize(
    ("prompt", "params"),
    [
        ("让这张脸呈现80年代港风胶片质感", {"look": "hk80s"}),
        ("80年代港风胶片质感", {"look": "hk80s"}),
        ("给照片加点胶片颗粒感", {"look": "grain"}),
        ("make it look like an old Kodak print", {"look": "faded"}),
        ("让皮肤更有质感，保留皱纹", {"look": "texture", "scope": "face", "restore": False}),
        ("只改脸 港风", {"look": "hk80s", "scope": "face"}),
        ("cinematic teal and orange film look", {"look": "teal-orange"}),
        ("turn the photo into a 1920s silent film still", {"look": "bw"}),
        ("做成民国老照片的感觉", {"look": "bw"}),
    ],
)
def test_style_requests_reach_edit_with_a_look_and_scope(rules, prompt, params):
    instruction = rules.interpret_now(prompt)
    assert instruction.task == "edit" and instruction.fields() == params


@pytest.mark.parametrize("prompt", ["把他变成白人，港风胶片", "make this child look older with a film look"])
def test_the_refusal_policy_holds_for_the_interpreter(rules, prompt):
    with pytest.raises(InstructionRefused) as refused:
        rules.interpret_now(prompt)
    assert refused.value.details["reason_en"] and refused.value.details["reason_zh"]
