"""The streamed readers of ``POST /v1/jobs`` (``serve_app.streamed_uploads``) read what the in-memory readers read:
the JSON ``image_b64`` cut out of the body and decoded in pieces gives the bytes and options ``json_upload`` gives,
wherever the body is split (escapes, data URLs, nesting, key order), and refuses what it refuses; a form read as it
arrives keeps the in-memory reader's refusals. What surrounds the upload is held to ``FORM_OVERHEAD_BYTES``."""

from __future__ import annotations

import asyncio
import base64
import json
import random

import pytest

from deployments.common.errors import InputError, InvalidParameter
from serve_app.streamed_uploads import FieldsTooLarge, StreamedForm, StreamedJson
from serve_app.upload_spool import UploadSpool
from serve_app.uploads import FORM_OVERHEAD_BYTES, json_upload

BOUNDARY = "xYz"


async def _feed(reader, body: bytes, cuts: list[int]) -> None:
    start = 0
    for cut in [*sorted(cuts), len(body)]:
        await reader.feed(body[start:cut])
        start = cut


def streamed_json(body: bytes, cuts: list[int]) -> tuple[bytes, dict]:
    """(the upload, the options) as ``StreamedJson`` reads ``body`` arriving in pieces cut at ``cuts``."""

    async def read():
        spool = UploadSpool(None, 1 << 30)
        reader = StreamedJson(spool)
        await _feed(reader, body, cuts)
        payload = reader.end()
        if not reader.streamed:
            raise InvalidParameter("no image_b64")
        payload.pop("image_b64")
        return (await spool.finish()).data, payload

    return asyncio.run(read())


def in_memory(body: bytes) -> tuple[bytes, dict]:
    upload = json_upload(body, {})
    return upload.data, {**upload.fields, **({"filename": upload.filename} if upload.filename else {})}


def _bodies(rng: random.Random) -> list[bytes]:
    bodies = []
    for _ in range(120):
        encoded = base64.b64encode(rng.randbytes(rng.randint(0, 40))).decode()
        if rng.random() < 0.3:
            encoded = "data:image/png;base64," + encoded
        options = {"task": "restore", "params": {"image_b64": "nested", "a": [1, {"b": 'q"\\'}]}, "n": "a,b:{c}"}
        items = list(options.items())
        items.insert(rng.randint(0, len(items)), ("image_b64", encoded))
        separators = rng.choice([None, (",", ":"), (" , ", " : ")])
        text = json.dumps(dict(items), indent=rng.choice([None, 1]), separators=separators)
        if rng.random() < 0.3:
            text = text.replace("/", "\\/")  # as PHP's json_encode writes base64's slashes
        if rng.random() < 0.1:
            text = text.replace("A", "\\u0041")
        bodies.append(text.encode())
    return bodies + [
        b'{"image_b64": "AA=="}',
        b'{"image_b64": "AA==AAAA"}',  # padding inside
        b'{"image_b64": "AAA"}',  # cut short
        b'{"image_b64": "A\\nAA="}',  # a line break
        b'{"image_b64": 5}',
        b'{"image_b64": ""}',
        b"[1]",
        b'{"x": 1, "image_b64": "AAAA", }',  # not JSON
        b'{"image_b64": "AAAA"',  # cut short
    ]


def test_the_json_field_decoded_in_pieces_is_what_the_whole_body_decodes_to_wherever_it_is_cut():
    rng = random.Random(32)
    for body in _bodies(rng):
        try:
            expected = ("read", *in_memory(body))
        except InputError:
            expected = ("refused",)
        for attempt in range(4):
            cuts = list(range(len(body))) if attempt == 0 else [rng.randint(0, len(body)) for _ in range(5)]
            try:
                got = ("read", *streamed_json(body, cuts))
            except InputError:
                got = ("refused",)
            assert got == expected, (body, cuts)


def test_image_b64_twice_is_refused():
    with pytest.raises(InvalidParameter, match="twice"):
        streamed_json(b'{"image_b64": "AAAA", "image_b64": "AAAA"}', [])


def test_options_around_image_b64_are_held_to_the_form_overhead():
    body = json.dumps({"task": "restore", "note": "x" * FORM_OVERHEAD_BYTES, "image_b64": "AAAA"}).encode()
    with pytest.raises(FieldsTooLarge) as refused:
        streamed_json(body, list(range(0, len(body), 65536)))
    assert (refused.value.http_status, refused.value.code) == (413, "body_too_large")


def form(*parts: tuple[str, str | None, bytes], close: bool = True) -> bytes:
    """A multipart body of (field name, file name or None, content)."""
    body = b""
    for name, filename, content in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        body += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + content + b"\r\n"
    return body + (f"--{BOUNDARY}--\r\n".encode() if close else b"")


def streamed_form(body: bytes, step: int = 7) -> tuple[bytes, StreamedForm]:
    async def read():
        spool = UploadSpool(None, 1 << 30)
        reader = StreamedForm(f"multipart/form-data; boundary={BOUNDARY}", spool)
        await _feed(reader, body, list(range(0, len(body), step)))
        await reader.end()
        return (await spool.finish()).data, reader

    return asyncio.run(read())


def test_a_form_gives_its_file_and_its_text_fields_and_ignores_an_edit_mask():
    video = b"\x00\x01" * 50
    body = form(("task", None, b"restore"), ("video", "v.mp4", video), ("mask", "m.png", b"m"), ("a", None, b"1"))
    data, reader = streamed_form(body)
    assert data == b"\x00\x01" * 50
    assert (reader.fields, reader.filename) == ({"task": "restore", "a": "1"}, "v.mp4")


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        (form(("task", None, b"restore")), "has no file field 'image'"),
        (form(("image", "a.jpg", b"a"), ("video", "b.mp4", b"b")), "send one file"),
        (form(("image", None, b"text")), "'image' must be a file"),
        (form(("image", "a.jpg", b"a"), ("background_image", "b.png", b"b")), "background_image: a file is read only"),
        (form(("image", "a.jpg", b"a"), close=False), "ends inside its file field"),
        (form(*[(f"f{n}", None, b"1") for n in range(65)], ("image", "a.jpg", b"a")), "more than 64 fields"),
    ],
    ids=["no file", "two files", "text image", "file option", "cut short", "too many fields"],
)
def test_a_form_is_refused_as_the_in_memory_reader_refuses_it(body, refusal):
    with pytest.raises(InvalidParameter, match=refusal):
        streamed_form(body)


def test_a_forms_text_fields_are_held_to_the_form_overhead():
    with pytest.raises(FieldsTooLarge):
        streamed_form(form(("note", None, b"x" * (FORM_OVERHEAD_BYTES + 1)), ("image", "a.jpg", b"a")), step=65536)
