"""Secrets read where they are used, from the environment or a mounted file, not from the Serve YAML: Ray logs an
application's arguments as it imports it ("Importing application 'x' with arguments {...}") and ``serve status`` and
the dashboard show them, so a secret written there is a secret in the logs. A secret still given inline keeps working,
with a warning that says where to put it instead (``warn_inline``)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pydantic import SecretStr

from deployments.common.errors import InvalidParameter

logger = logging.getLogger(__name__)

ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
MAX_SECRET_FILE_BYTES = 4096


def read_secret(
    what: str,
    *,
    inline: SecretStr | None = None,
    env: str | None = None,
    env_required: bool = False,
    file: str | Path | None = None,
) -> SecretStr | None:
    """The secret from the one place it is given: ``inline`` (the config), the environment variable ``env`` (unset is
    no secret, unless ``env_required``), or ``file`` (its text, without the surrounding whitespace). None when none is
    given; ``InvalidParameter`` for two places, a blank value or a file that cannot be read (never the value)."""
    found: list[tuple[str, str]] = []
    if inline is not None:
        found.append(("inline", inline.get_secret_value()))
    if env is not None:
        value = os.environ.get(env)
        if value is not None:
            found.append((f"the environment variable {env}", value.strip()))
        elif env_required:
            raise InvalidParameter(f"{what}: the environment variable {env} is not set")
    if file is not None:
        found.append((f"the file {file}", _read_file(what, Path(file))))
    if len(found) > 1:
        places = ", ".join(where for where, _ in found)
        raise InvalidParameter(f"{what} is given {len(found)} ways ({places}): keep one")
    if not found:
        return None
    where, value = found[0]
    if not value:
        raise InvalidParameter(f"{what} from {where} is blank")
    return SecretStr(value)


def _read_file(what: str, path: Path) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SECRET_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidParameter(f"{what}: the file {path} cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_SECRET_FILE_BYTES:
        raise InvalidParameter(f"{what}: the file {path} is over {MAX_SECRET_FILE_BYTES} bytes: not a secret")
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise InvalidParameter(f"{what}: the file {path} is not UTF-8 text") from None


def warn_inline(field: str, instead: str) -> None:
    """Log that the secret ``field`` sits in the Serve arguments (logged by Ray) and where it belongs."""
    logger.warning(
        "%s is given inline in the Serve arguments, which Ray logs when it imports the application and `serve status` "
        "shows: it works, but put it in %s instead",
        field,
        instead,
    )
