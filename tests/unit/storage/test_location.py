"""Location strings: what ``s3://`` and local paths mean, and which store ``open_store`` builds from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployments.common.errors import InvalidParameter
from storage.base import Location, StoreSettings, open_store, parse_location
from storage.local import LocalStore
from storage.s3 import S3Store


@pytest.mark.parametrize(
    ("uri", "location"),
    [
        ("s3://photos", Location("s3", "photos", "")),
        ("s3://photos/", Location("s3", "photos", "")),
        ("s3://photos/in/raw/", Location("s3", "photos", "in/raw")),
        ("s3://my.bucket-1/a b/ü?x#y", Location("s3", "my.bucket-1", "a b/ü?x#y")),
        ("file:///srv/photos", Location("file", "/srv/photos")),
        ("file://localhost/srv/my%20photos/", Location("file", "/srv/my photos")),
        ("/srv/photos/../in", Location("file", "/srv/in")),
    ],
)
def test_parse_location(uri: str, location: Location) -> None:
    assert parse_location(uri) == location


def test_relative_and_home_paths_become_absolute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/someone")

    assert parse_location("in") == Location("file", str(tmp_path / "in"))
    assert parse_location("~/in") == Location("file", "/home/someone/in")


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "s3://",
        "s3://Up",
        "s3://ab",
        "s3://b_x/p",
        "s3://photos/../x",
        "gs://p",
        "http://h/x",
        "file://host/x",
        "file:rel",
    ],
)
def test_parse_location_refuses(uri: str) -> None:
    with pytest.raises(InvalidParameter):
        parse_location(uri)


def test_location_prints_as_its_uri() -> None:
    assert str(parse_location("s3://photos/in/")) == "s3://photos/in"
    assert str(parse_location("s3://photos")) == "s3://photos"
    assert str(parse_location("file:///srv/x")) == "/srv/x"


def test_open_store_on_a_folder(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))

    assert isinstance(store, LocalStore)
    assert store.root == tmp_path


def test_open_store_on_s3_builds_a_client_without_network() -> None:
    settings = StoreSettings(endpoint_url="http://127.0.0.1:9", region="eu-west-1", access_key="k", secret_key="s")

    store = open_store("s3://photos/in/", settings)

    assert isinstance(store, S3Store)
    assert (store.bucket, store.prefix, store.endpoint_url) == ("photos", "in", "http://127.0.0.1:9")


def test_settings_do_not_print_the_secret() -> None:
    assert "hunter2" not in repr(StoreSettings(access_key="k", secret_key="hunter2"))


def test_open_store_on_s3_does_not_need_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    assert isinstance(open_store("s3://photos"), S3Store)
