"""Object keys: decoding event keys, refusing keys that escape their prefix, naming results beside their sources.

A valid key is a relative POSIX path that means the same thing on S3 and in a local folder: non-empty segments
separated by ``/``, none of them ``.`` or ``..``, no backslash, no NUL, at most 1024 UTF-8 bytes (the S3 limit).
Unicode and spaces are fine and round-trip unchanged.
"""

from __future__ import annotations

import urllib.parse
from pathlib import PurePosixPath

from storage.errors import InvalidKey

MAX_KEY_BYTES = 1024
ERRORS_FOLDER = "_errors"


def validate_key(key: str) -> str:
    """Return ``key`` unchanged, or raise ``InvalidKey`` when it could escape its prefix or differ between stores."""
    if not key:
        raise InvalidKey(key, "empty")
    if "\x00" in key:
        raise InvalidKey(key, "contains NUL")
    if "\\" in key:
        raise InvalidKey(key, "contains a backslash")
    if key.startswith("/"):
        raise InvalidKey(key, "absolute path")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise InvalidKey(key, f"longer than {MAX_KEY_BYTES} UTF-8 bytes")
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidKey(key, f"has a {segment or 'empty'!r} path segment")
    return key


def is_valid_key(key: str) -> bool:
    """Whether ``validate_key`` accepts ``key``; for listings that must skip foreign objects they cannot address."""
    try:
        validate_key(key)
    except InvalidKey:
        return False
    return True


def validate_list_prefix(prefix: str) -> str:
    """Return a listing prefix unchanged (it may end mid-name or with ``/``), refusing one that climbs out."""
    stripped = prefix.rstrip("/")
    if stripped:
        validate_key(stripped)
    elif prefix:
        raise InvalidKey(prefix, "absolute path")
    return prefix


def normalize_prefix(prefix: str) -> str:
    """A folder-like prefix without surrounding slashes (``""`` for none), checked like a key."""
    stripped = prefix.strip("/")
    return validate_key(stripped) if stripped else ""


def safe_join(prefix: str, key: str) -> str:
    """``prefix/key`` where neither part can climb out of the prefix."""
    folder = normalize_prefix(prefix)
    validate_key(key)
    return f"{folder}/{key}" if folder else key


def decode_event_key(raw: str) -> str:
    """The object key from an S3/MinIO event record (URL-encoded, ``+`` for space), validated."""
    return validate_key(urllib.parse.unquote_plus(raw))


def result_key(output_prefix: str, key: str, ext: str) -> str:
    """``<output>/<key without its extension>.<ext>``: where the result for source ``key`` is written."""
    clean_ext = ext.lstrip(".")
    if not clean_ext or "/" in clean_ext or "\\" in clean_ext:
        raise InvalidKey(f"{key}.{ext}", f"bad extension {ext!r}")
    path = PurePosixPath(validate_key(key))
    return safe_join(output_prefix, str(path.with_suffix(f".{clean_ext}")))


def metadata_key(output_prefix: str, key: str) -> str:
    """``<output>/<key without its extension>.json``: the result metadata written beside the result."""
    return result_key(output_prefix, key, "json")


def error_key(output_prefix: str, key: str) -> str:
    """``<output>/_errors/<key>.json``: the full source key is kept, so ``a.jpg`` and ``a.png`` do not collide."""
    return safe_join(output_prefix, f"{ERRORS_FOLDER}/{validate_key(key)}.json")
