"""Key configuration: inline or in a file, checked at start; ``portrait keys create`` prints an entry that works."""

from __future__ import annotations

import json
import logging

import pytest
import yaml

from deployments.common.errors import InvalidParameter
from serve_app.auth import ApiKeyIn, AuthConfig, KeyRing, hash_key, load_keys, warn_when_open
from serve_app.cli import main


def entry(key_id: str, token: str, **limits) -> dict:
    return {"id": key_id, "sha256": hash_key(token), **limits}


def test_a_key_is_found_by_its_hash_and_a_wrong_one_is_not():
    ring = KeyRing([ApiKeyIn.model_validate(entry("acme", "pk_secret", tasks=["idphoto"]))])
    found = ring.find("pk_secret")
    assert (found.id, found.tasks) == ("acme", frozenset({"idphoto"}))
    assert ring.find("pk_secreT") is None


def test_keys_file_adds_to_the_inline_keys(tmp_path):
    path = tmp_path / "keys.yaml"
    path.write_text(yaml.safe_dump({"keys": [entry("file-key", "pk_two", daily_quota=3)]}))
    ring = load_keys(AuthConfig(keys=[ApiKeyIn.model_validate(entry("inline", "pk_one"))], keys_file=path))
    assert (ring.find("pk_one").id, ring.find("pk_two").id, ring.find("pk_two").daily_quota) == (
        "inline",
        "file-key",
        3,
    )


def test_a_keys_file_that_is_not_a_list_is_refused_with_its_path(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"id": "x"}))
    with pytest.raises(InvalidParameter, match="expected a list of keys"):
        load_keys(AuthConfig(keys_file=path))


def test_two_keys_with_one_name_are_refused():
    with pytest.raises(InvalidParameter, match="two keys are named 'acme'"):
        KeyRing([ApiKeyIn.model_validate(entry("acme", "a")), ApiKeyIn.model_validate(entry("acme", "b"))])


def test_a_key_naming_an_unknown_task_is_refused_at_start():
    ring = KeyRing([ApiKeyIn.model_validate(entry("acme", "a", tasks=["idfoto"]))])
    with pytest.raises(InvalidParameter, match=r"unknown tasks \['idfoto'\]"):
        ring.check_tasks(["restore", "idphoto", "cartoon"])


def test_keys_create_prints_the_key_once_and_an_entry_that_matches_it(capsys):
    assert main(["keys", "create", "--id", "acme", "--rate-per-s", "2", "--tasks", "idphoto,cartoon"]) == 0
    first, _, *entry_lines = capsys.readouterr().out.splitlines()
    key = first.rsplit(" ", 1)[1]
    (printed,) = yaml.safe_load("\n".join(entry_lines))
    assert printed == {"id": "acme", "sha256": hash_key(key), "rate_per_s": 2.0, "tasks": ["idphoto", "cartoon"]}
    assert KeyRing([ApiKeyIn.model_validate(printed)]).find(key).id == "acme"


@pytest.mark.parametrize(("host", "warned"), [("0.0.0.0", True), ("127.0.0.1", False), ("localhost", False)])
def test_an_open_service_beyond_loopback_warns_once_at_start(caplog, host, warned):
    with caplog.at_level(logging.WARNING, logger="serve_app.auth.guard"):
        assert warn_when_open(KeyRing([]), host) is warned
    assert len(caplog.records) == int(warned)


def test_a_service_with_keys_does_not_warn(caplog):
    ring = KeyRing([ApiKeyIn.model_validate(entry("acme", "a"))])
    with caplog.at_level(logging.WARNING, logger="serve_app.auth.guard"):
        assert warn_when_open(ring, "0.0.0.0") is False
    assert caplog.records == []
