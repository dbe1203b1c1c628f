"""Key handling: event keys decode exactly, and no key can climb out of its prefix."""

from __future__ import annotations

import urllib.parse

import pytest

from storage.errors import InvalidKey
from storage.keys import (
    decode_event_key,
    error_name,
    result_name,
    safe_join,
    validate_key,
    validate_list_prefix,
)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("in%2Fcat.jpg", "in/cat.jpg"),  # moto encodes even "/"
        ("in/my+photo.jpg", "in/my photo.jpg"),  # MinIO/AWS: "+" is a space
        ("in/1%2B1.jpg", "in/1+1.jpg"),
        ("in/caf%C3%A9.jpg", "in/café.jpg"),
        ("in/100%25.jpg", "in/100%.jpg"),
    ],
)
def test_decode_event_key(raw: str, key: str) -> None:
    assert decode_event_key(raw) == key


@pytest.mark.parametrize("key", ["in/Zoë & friends/photo 1+2.jpg", "写真/顔 (1).png", "a%2Fb/c d.jpg"])
def test_event_keys_round_trip_as_s3_encodes_them(key: str) -> None:
    assert decode_event_key(urllib.parse.quote_plus(key, safe="/")) == key
    assert decode_event_key(urllib.parse.quote_plus(key, safe="")) == key


@pytest.mark.parametrize("raw", ["..%2Fsecret.jpg", "in%2F..%2F..%2Fx", "%2Fetc%2Fpasswd", "a%5Cb", "a%00b", ""])
def test_decoded_event_keys_that_escape_are_refused(raw: str) -> None:
    with pytest.raises(InvalidKey):
        decode_event_key(raw)


@pytest.mark.parametrize(
    "key", ["", "..", "../x", "a/../../x", "a/..", "/abs", "a\\b", "a\x00b", "a//b", "a/", "./a", "a/./b", "é" * 513]
)
def test_validate_key_refuses(key: str) -> None:
    with pytest.raises(InvalidKey) as refused:
        validate_key(key)
    assert refused.value.http_status == 422


@pytest.mark.parametrize("key", ["a", "a/b/c.jpg", "..hidden", "a..b", ".dotfile", "sp ace/ü.jpg", "é" * 512])
def test_validate_key_accepts(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize(
    ("prefix", "key", "joined"),
    [
        ("out", "a/b.jpg", "out/a/b.jpg"),
        ("out/", "b.jpg", "out/b.jpg"),
        ("/out/x/", "b.jpg", "out/x/b.jpg"),
        ("", "b.jpg", "b.jpg"),
    ],
)
def test_safe_join(prefix: str, key: str, joined: str) -> None:
    assert safe_join(prefix, key) == joined


@pytest.mark.parametrize(("prefix", "key"), [("out", "../b.jpg"), ("out/../..", "b.jpg"), ("out", "/b.jpg")])
def test_safe_join_refuses_escapes(prefix: str, key: str) -> None:
    with pytest.raises(InvalidKey):
        safe_join(prefix, key)


@pytest.mark.parametrize("prefix", ["", "in/", "in/ca", "in"])
def test_list_prefix_may_end_anywhere(prefix: str) -> None:
    assert validate_list_prefix(prefix) == prefix


@pytest.mark.parametrize("prefix", ["../", "/", "/in", "in/../"])
def test_list_prefix_cannot_escape(prefix: str) -> None:
    with pytest.raises(InvalidKey):
        validate_list_prefix(prefix)


@pytest.mark.parametrize(
    ("key", "ext", "expected"),
    [
        ("in/cat.jpg", "png", "out/in/cat.png"),
        ("in/cat.jpg", ".webp", "out/in/cat.webp"),
        ("in/cat", "png", "out/in/cat.png"),
        ("in/cat.tar.gz", "png", "out/in/cat.tar.png"),
        ("in/.hidden", "png", "out/in/.hidden.png"),
        ("in/Zoë 1+2.jpg", "png", "out/in/Zoë 1+2.png"),
    ],
)
def test_result_name(key: str, ext: str, expected: str) -> None:
    assert safe_join("out", result_name(key, ext, within="out")) == expected


@pytest.mark.parametrize("ext", ["", ".", "a/b", "a\\b"])
def test_result_name_refuses_bad_extensions(ext: str) -> None:
    with pytest.raises(InvalidKey):
        result_name("in/cat.jpg", ext)


def test_the_metadata_sits_beside_the_result() -> None:
    assert safe_join("out/", result_name("in/cat.jpg", "json", within="out/")) == "out/in/cat.json"


def test_error_name_keeps_the_full_source_key() -> None:
    assert safe_join("out", error_name("in/cat.jpg", within="out")) == "out/_errors/in/cat.jpg.json"
    assert error_name("cat photo.png") == "_errors/cat photo.png.json"


def test_derived_names_refuse_escaping_sources() -> None:
    with pytest.raises(InvalidKey):
        result_name("../x.jpg", "png")
    with pytest.raises(InvalidKey):
        result_name("/x.jpg", "json")
    with pytest.raises(InvalidKey):
        error_name("a/../../x")
