"""An upload read into an :class:`~serve_app.upload_spool.UploadSpool` as it streams, in any of the three request
shapes (``serve_app.uploads``), so that a 512 MiB video costs the ingress a few MiB, not its size several times over:

- a raw body goes to the spool as it arrives;
- ``multipart/form-data`` is parsed as it arrives (python-multipart's parser): the file part (``image``, or
  ``video``) goes to the spool, the text fields (options) to memory, at most ``FORM_OVERHEAD_BYTES`` of them;
- ``application/json``: the top-level ``image_b64`` string is cut out of the body as it arrives and base64-decoded
  in pieces into the spool (a ``data:`` URL prefix dropped, JSON escapes such as ``\\/`` honoured), the rest of the
  object (``task``, ``params``, ...: at most ``FORM_OVERHEAD_BYTES``) parsed as JSON once the body has ended.

Every body is read by ``serve_app.uploads.stream_body``: the same caps, deadline and bytes-in-flight budget as every
other body.
"""

from __future__ import annotations

import binascii
import codecs
import json
import re
from dataclasses import dataclass, field
from typing import Any

import python_multipart
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import parse_options_header
from starlette.requests import Request

from deployments.common.errors import InputError, InvalidParameter
from serve_app.byte_caps import MediaCaps
from serve_app.upload_spool import UploadSpool
from serve_app.uploads import (
    FILE_FIELDS,
    FORM_OVERHEAD_BYTES,
    MAX_FORM_FIELDS,
    MAX_FORM_FILES,
    UploadCap,
    load_json,
    media_type,
    stream_body,
)

UPLOAD_FIELDS = ("image", "video")  # the form fields that may carry the upload; a video job may name it "video"
FIELD = "image_b64"
_DATA_URL_PREFIX_BYTES = 1024  # how far a ``data:`` URL's comma may come


class FieldsTooLarge(InputError):
    """What surrounds the upload (form fields, JSON keys) is larger than options ever are."""

    code = "body_too_large"
    http_status = 413


@dataclass
class StreamedUpload:
    """The options of a request whose upload went to the spool; ``has_upload`` False: the body carried none (a JSON
    job naming an ``input`` key instead)."""

    fields: dict[str, Any] = field(default_factory=dict)
    filename: str | None = None
    has_upload: bool = False


async def spool_upload(request: Request, spool: UploadSpool, *, caps: MediaCaps, timeout_s: float) -> StreamedUpload:
    """Read the request's body, its upload into ``spool`` (not yet finished: the caller calls ``spool.finish``)."""
    content_type = media_type(request)
    query = dict(request.query_params)
    cap = UploadCap(caps, content_type)
    if content_type == "multipart/form-data":
        form = StreamedForm(request.headers.get("content-type", ""), spool)
        await stream_body(request, cap=cap, timeout_s=timeout_s, sink=form.feed)
        await form.end()
        return StreamedUpload({**query, **form.fields}, form.filename, has_upload=True)
    if content_type == "application/json":
        body = StreamedJson(spool)
        await stream_body(request, cap=cap, timeout_s=timeout_s, sink=body.feed)
        payload = body.end()
        if not body.streamed and isinstance(payload.get(FIELD), str):  # a key written with escapes: it was small
            await spool.write(_decode_whole(payload[FIELD]))
            body.streamed = True
        if body.streamed:
            payload.pop(FIELD, None)
            filename = payload.pop("filename", None)
            return StreamedUpload({**query, **payload}, filename, has_upload=True)
        return StreamedUpload({**query, **payload})
    size_bytes = await stream_body(request, cap=cap, timeout_s=timeout_s, sink=spool.write)
    if not size_bytes:
        raise InvalidParameter("send the image as multipart field 'image', as JSON 'image_b64', or as the raw body")
    return StreamedUpload(query, None, has_upload=True)


class StreamedForm:
    """A ``multipart/form-data`` body parsed as it arrives: the one file part of ``UPLOAD_FIELDS`` into the spool,
    the text fields in ``fields``; the same limits and refusals as the in-memory reader (``serve_app.uploads``)."""

    def __init__(self, content_type: str, spool: UploadSpool) -> None:
        _, params = parse_options_header(content_type)
        boundary = params.get(b"boundary")
        if not boundary:
            raise InvalidParameter("the multipart form has no boundary in its Content-Type")
        charset = params.get(b"charset", b"utf-8").decode("latin-1")
        try:
            self._charset = codecs.lookup(charset).name
        except LookupError:
            self._charset = "latin-1"
        self._spool = spool
        self._parser = python_multipart.MultipartParser(
            boundary,
            {
                "on_part_begin": self._on_part_begin,
                "on_part_data": self._on_part_data,
                "on_part_end": self._on_part_end,
                "on_header_field": self._on_header_field,
                "on_header_value": self._on_header_value,
                "on_header_end": self._on_header_end,
                "on_headers_finished": self._on_headers_finished,
            },
        )
        self.fields: dict[str, str] = {}
        self.filename: str | None = None
        self._files = self._texts = self._text_bytes = 0
        self._header_name = self._header_value = self._disposition = b""
        self._name = ""
        self._kind = "text"  # of the current part: "text", "upload" (to the spool), "ignored" (the OpenAI mask)
        self._text = bytearray()
        self._upload_state = "none"  # "none", "open" (its bytes arriving), "done"
        self._out: list[bytes] = []  # the upload's bytes of the chunk being parsed, for the spool

    async def feed(self, chunk: bytes) -> None:
        try:
            self._parser.write(chunk)
        except FormParserError as exc:
            raise InvalidParameter(f"the multipart form cannot be parsed: {exc}") from None
        for data in self._out:
            await self._spool.write(data)
        self._out.clear()

    async def end(self) -> None:
        try:
            self._parser.finalize()
        except FormParserError as exc:
            raise InvalidParameter(f"the multipart form cannot be parsed: {exc}") from None
        if self._upload_state == "none":
            raise InvalidParameter("the multipart form has no file field 'image'")
        if self._upload_state == "open":
            raise InvalidParameter("the multipart form ends inside its file field (its closing boundary is missing)")

    def _on_part_begin(self) -> None:
        self._disposition = b""
        self._text = bytearray()

    def _on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def _on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _on_header_end(self) -> None:
        if self._header_name.lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_name = self._header_value = b""

    def _on_headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        if b"name" not in options:
            raise InvalidParameter('a part of the multipart form has no name (Content-Disposition "name")')
        self._name = _decode(options[b"name"], self._charset)
        if b"filename" not in options:
            self._texts += 1
            if self._texts > MAX_FORM_FIELDS:
                raise InvalidParameter(f"the multipart form has more than {MAX_FORM_FIELDS} fields")
            if self._name in UPLOAD_FIELDS:
                raise InvalidParameter(f"the multipart field '{self._name}' must be a file")
            self._kind = "text"
            return
        self._files += 1
        if self._files > MAX_FORM_FILES:
            raise InvalidParameter(f"the multipart form has more than {MAX_FORM_FILES} files")
        if self._name not in FILE_FIELDS:
            # An option sent as a file (``background_image`` as a picture) would otherwise vanish unread.
            raise InvalidParameter(
                f"{self._name}: a file is read only from field 'image'; options are text fields",
                details={"field": self._name},
            )
        if self._name not in UPLOAD_FIELDS:
            self._kind = "ignored"  # an OpenAI edit's mask: never used
            return
        if self._upload_state != "none":
            raise InvalidParameter("send one file, in field 'image' (or 'video'), not several")
        self._kind, self._upload_state = "upload", "open"
        self.filename = _decode(options[b"filename"], self._charset)

    def _on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._kind == "upload":
            self._out.append(data[start:end])
        elif self._kind == "text":
            self._text_bytes += end - start
            if self._text_bytes > FORM_OVERHEAD_BYTES:
                raise FieldsTooLarge(
                    f"the multipart form's text fields hold more than {FORM_OVERHEAD_BYTES} bytes: options are "
                    "small, the upload goes in field 'image'"
                )
            self._text += data[start:end]

    def _on_part_end(self) -> None:
        if self._kind == "upload":
            self._upload_state = "done"
        elif self._kind == "text":
            self.fields[self._name] = _decode(bytes(self._text), self._charset)
        self._kind = "text"


def _decode(raw: bytes, charset: str) -> str:
    """As Starlette decodes form names and values: the form's charset, Latin-1 when that fails."""
    try:
        return raw.decode(charset)
    except (UnicodeDecodeError, LookupError):
        return raw.decode("latin-1")


_STRUCTURE = re.compile(rb'[{}\[\]",:]')
_WHITESPACE = b" \t\r\n"


class StreamedJson:
    """A JSON body whose top-level ``image_b64`` string is decoded into the spool as it arrives; :meth:`end` parses
    the rest of the object (that field left as ``""``). Only the structure is followed here (nesting, strings and
    their escapes, which key a value belongs to), so anything else wrong with the JSON is found by the parser at the
    end, with the message it always gave. The rest is held to ``FORM_OVERHEAD_BYTES``."""

    def __init__(self, spool: UploadSpool) -> None:
        self._spool = spool
        self.rest = bytearray()
        self.streamed = False
        self._state = "outer"  # "outer", "string", "escape", "colon" (after the field's key), "value", "value-escape"
        self._depth = 0
        self._top_is_object: bool | None = None
        self._expect_key = False
        self._in_key = False
        self._key = bytearray()
        self._field_next = False  # the key just read is the field: its value follows the colon
        self._escape = bytearray()
        self._value = _Base64Value()

    async def feed(self, chunk: bytes) -> None:
        decoded = self._scan(chunk)
        if len(self.rest) > FORM_OVERHEAD_BYTES:
            raise FieldsTooLarge(
                f"the JSON around '{FIELD}' holds more than {FORM_OVERHEAD_BYTES} bytes: options are small, the "
                f"upload goes in '{FIELD}' (or multipart field 'image')"
            )
        if decoded:
            await self._spool.write(decoded)

    def end(self) -> dict[str, Any]:
        if self._state in ("value", "value-escape"):
            raise InvalidParameter(f"the JSON body cannot be parsed: it ends inside '{FIELD}'")
        payload = load_json(bytes(self.rest), "the JSON body")
        if not isinstance(payload, dict):
            raise InvalidParameter(f"the JSON body needs a string field '{FIELD}'")
        return payload

    def _scan(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        i, size = 0, len(chunk)
        while i < size:
            state = self._state
            if state == "value":
                end = _string_stop(chunk, i)
                out.append(self._value.feed(chunk[i:end]))
                if end == size:
                    return b"".join(out)
                i = end + 1
                if chunk[end : end + 1] == b'"':
                    out.append(self._value.end())
                    self.rest += b'""'
                    self.streamed = True
                    self._state = "outer"
                else:
                    self._escape = bytearray(b"\\")
                    self._state = "value-escape"
            elif state == "value-escape":  # one byte at a time: escapes are rare and short
                self._escape += chunk[i : i + 1]
                i += 1
                if len(self._escape) == (6 if self._escape[1:2] == b"u" else 2):
                    out.append(self._value.feed(_unescape(bytes(self._escape))))
                    self._state = "value"
            elif state in ("string", "escape"):
                i = self._scan_string(chunk, i)
            elif state == "colon":
                i = self._scan_colon(chunk, i)
            else:
                i = self._scan_outer(chunk, i)
        return b"".join(out)

    def _scan_outer(self, chunk: bytes, i: int) -> int:
        found = _STRUCTURE.search(chunk, i)
        if found is None:
            self.rest += chunk[i:]
            return len(chunk)
        at = found.start()
        self.rest += chunk[i : at + 1]
        token = chunk[at : at + 1]
        if token in (b"{", b"["):
            self._depth += 1
            if self._top_is_object is None:
                self._top_is_object = token == b"{"
            self._expect_key = self._depth == 1 and token == b"{"
        elif token in (b"}", b"]"):
            self._depth -= 1
        elif token == b",":
            self._expect_key = self._depth == 1 and bool(self._top_is_object)
        elif token == b'"':
            self._in_key = self._expect_key and self._depth == 1
            self._expect_key = False
            self._key = bytearray()
            self._state = "string"
        return at + 1

    def _scan_string(self, chunk: bytes, i: int) -> int:
        if self._state == "escape":  # the byte after a backslash, whatever it is, is inside the string
            self.rest += chunk[i : i + 1]
            if self._in_key:
                self._key += chunk[i : i + 1]
            self._state = "string"
            return i + 1
        end = _string_stop(chunk, i)
        self.rest += chunk[i : end + 1]
        if self._in_key and len(self._key) <= len(FIELD):
            self._key += chunk[i:end]
        if end == len(chunk):
            return end
        if chunk[end : end + 1] == b"\\":
            if self._in_key:
                self._key += b"\\"
            self._state = "escape"
        else:
            self._state = "outer"
            if self._in_key and self._key == FIELD.encode():
                self._state = "colon"
        return end + 1

    def _scan_colon(self, chunk: bytes, i: int) -> int:
        """After the field's key: whitespace, the colon, whitespace, then its value: a string is streamed."""
        while i < len(chunk):
            byte = chunk[i : i + 1]
            if byte in _WHITESPACE:
                self.rest += byte
            elif byte == b":" and not self._field_next:
                self.rest += byte
                self._field_next = True
            elif byte == b'"' and self._field_next:
                if self.streamed:
                    raise InvalidParameter(f"the JSON body has '{FIELD}' twice")
                self._field_next = False
                self._state = "value"
                return i + 1
            else:  # not a string (a number, null...) or not JSON: the parser at the end says so
                self._field_next = False
                self._state = "outer"
                return i
            i += 1
        return i


def _string_stop(chunk: bytes, start: int) -> int:
    """Where the string running from ``start`` stops (its closing quote or a backslash), or ``len(chunk)``: two
    ``find`` calls, far faster than a regular expression over megabytes of base64."""
    quote = chunk.find(b'"', start)
    end = len(chunk) if quote < 0 else quote
    backslash = chunk.find(b"\\", start, end)
    return end if backslash < 0 else backslash


class _Base64Value:
    """Base64 decoded piece by piece, as strictly as ``base64.b64decode(validate=True)``: only the alphabet, padding
    only at the very end; a ``data:`` URL's prefix (up to its comma) dropped first."""

    def __init__(self) -> None:
        self._carry = b""
        self._start: bytes | None = b""  # the value's first bytes until it is known whether it is a data URL
        self._padded = False

    def feed(self, text: bytes) -> bytes:
        if self._start is not None:
            text = self._start + text
            if len(text) < len(b"data:"):
                self._start = text
                return b""
            if text.startswith(b"data:"):
                comma = text.find(b",")
                if comma < 0:
                    if len(text) > _DATA_URL_PREFIX_BYTES:
                        raise InvalidParameter(f"'{FIELD}' is a data URL without a comma before its base64")
                    self._start = text
                    return b""
                text = text[comma + 1 :]
            self._start = None
        text = self._carry + text
        whole = len(text) - len(text) % 4
        block, self._carry = text[:whole], text[whole:]
        if not block:
            return b""
        if self._padded:
            raise InvalidParameter(f"'{FIELD}' is not valid base64: Excess data after padding")
        try:
            decoded = binascii.a2b_base64(block, strict_mode=True)
        except binascii.Error as exc:
            raise InvalidParameter(f"'{FIELD}' is not valid base64: {exc}") from None
        self._padded = block.endswith(b"=")
        return decoded

    def end(self) -> bytes:
        if self._start is not None:  # shorter than "data:", or a data URL without its comma
            if self._start.startswith(b"data:"):
                raise InvalidParameter(f"'{FIELD}' is a data URL without a comma before its base64")
            start, self._start = self._start, None
            tail = self.feed(start)
        else:
            tail = b""
        if self._carry:
            raise InvalidParameter(f"'{FIELD}' is not valid base64: Incorrect padding")
        return tail


def _unescape(escape: bytes) -> bytes:
    """One JSON escape (``\\/``, ``\\u002F``...) as the bytes it stands for."""
    try:
        return json.loads(b'"' + escape + b'"').encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        raise InvalidParameter(f"the JSON body cannot be parsed: a bad escape {escape!r} in '{FIELD}'") from None


def _decode_whole(encoded: str) -> bytes:
    value = _Base64Value()
    return value.feed(encoded.encode("utf-8")) + value.end()
