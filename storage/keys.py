"""Object keys: decoding event keys, refusing keys that escape their prefix, naming results beside their sources.

A valid key is a relative POSIX path that means the same thing on S3 and in a local folder: non-empty segments
separated by ``/``, none of them ``.`` or ``..``, no backslash, no NUL, at most 1024 UTF-8 bytes (the S3 limit).
Unicode and spaces are fine and round-trip unchanged.

Names derived from a key (results, records) must also be portable: at most 1024 bytes with their output prefix and
no path segment over 255 bytes (what ext4, XFS, APFS and NTFS allow), checked here, the same for S3 and folders, so a
key never gets a result on one store and a file-system error on another. ``_errors/`` of an output holds only error
records: a source key under ``_errors/`` gets no result (it would share a name with the error record of another key)
and its error record, like that of a key whose ``_errors/<key>.json`` would not be portable, goes to
``_errors/_errors/<sha256 of the key>.json``, a name no ordinary key's error record can take.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from pathlib import PurePosixPath

from storage.errors import InvalidKey

MAX_KEY_BYTES = 1024
MAX_NAME_BYTES = 255  # one path segment of a derived name
ERRORS_FOLDER = "_errors"
HASHED_FOLDER = f"{ERRORS_FOLDER}/{ERRORS_FOLDER}"  # names no ordinary key's record can take
LEASE_SUFFIX = ".lease"
CALLBACK_SUFFIX = ".callback"


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


def is_reserved(key: str) -> bool:
    """Whether ``key`` lies under ``_errors/``, where an output keeps its error records."""
    return key.split("/", 1)[0] == ERRORS_FOLDER


def result_name(key: str, ext: str, *, within: str = "") -> str:
    """``<key without its extension>.<ext>``, portable once under the output prefix ``within``; else ``InvalidKey``."""
    clean_ext = ext.lstrip(".")
    if not clean_ext or "/" in clean_ext or "\\" in clean_ext:
        raise InvalidKey(f"{key}.{ext}", f"bad extension {ext!r}")
    if is_reserved(validate_key(key)):
        raise InvalidKey(key, f"{ERRORS_FOLDER}/ of the output holds error records, so a source there gets no result")
    name = str(PurePosixPath(key).with_suffix(f".{clean_ext}"))
    if not _is_portable(name, within):
        raise InvalidKey(
            key, f"its result name would be longer than {MAX_KEY_BYTES} bytes or have a name over {MAX_NAME_BYTES}"
        )
    return name


def error_name(key: str, *, within: str = "") -> str:
    """``_errors/<key>.json`` (the full key kept: ``a.jpg`` and ``a.png`` do not collide), or the hashed name when
    the key is reserved or that name would not be portable under ``within``. Valid for every valid key."""
    name = f"{ERRORS_FOLDER}/{validate_key(key)}.json"
    if is_reserved(key) or not _is_portable(name, within):
        return _hashed_name(key, ".json")
    return name


def lease_name(key: str) -> str:
    """``_errors/_errors/<sha256 of the key>.lease``: where a worker claims the source while it processes it."""
    return _hashed_name(key, LEASE_SUFFIX)


def callback_name(key: str) -> str:
    """``_errors/_errors/<sha256 of the key>.callback``: a bucket route's callback for the source, still to deliver."""
    return _hashed_name(key, CALLBACK_SUFFIX)


def _hashed_name(key: str, suffix: str) -> str:
    return f"{HASHED_FOLDER}/{hashlib.sha256(key.encode('utf-8')).hexdigest()}{suffix}"


def _is_portable(name: str, within: str) -> bool:
    folder = normalize_prefix(within)
    joined = f"{folder}/{name}" if folder else name
    return len(joined.encode("utf-8")) <= MAX_KEY_BYTES and all(
        len(segment.encode("utf-8")) <= MAX_NAME_BYTES for segment in name.split("/")
    )
