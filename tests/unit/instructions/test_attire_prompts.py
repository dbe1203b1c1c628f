"""Formal clothes asked for in words reach the ID photo with a template and, for a suit, its colour (the rule
interpreter; #35: "换成西装", "穿正装", "in a navy suit"); a suit in a generated portrait's words stays the
portrait's."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("prompt", "params"),
    [
        ("换成西装", {"attire": "suit-tie"}),
        ("证件照 穿正装 蓝底", {"attire": "suit-tie", "background": "#628bce"}),
        (
            "in a navy suit, blue background ID photo",
            {"attire": "suit-tie", "attire_color": "navy", "background": "#628bce"},
        ),
        (
            "黑色西装 一寸 白底",
            {"attire": "suit-tie", "attire_color": "black", "spec": "cn-1inch", "background": "#ffffff"},
        ),
        ("女士西装的证件照", {"attire": "women-suit"}),
        ("穿白衬衫的证件照", {"attire": "white-shirt"}),
        ("校服 一寸照", {"attire": "school-uniform", "spec": "cn-1inch"}),
    ],
)
def test_clothes_in_words_reach_the_id_photo(rules, prompt, params):
    instruction = rules.interpret_now(prompt)
    assert instruction.task == "idphoto" and instruction.fields() == params


def test_a_suit_in_a_portraits_words_stays_the_portraits(rules):
    instruction = rules.interpret_now("generate a portrait in a business suit")
    assert instruction.task == "portrait" and instruction.fields() == {"style": "business"}
