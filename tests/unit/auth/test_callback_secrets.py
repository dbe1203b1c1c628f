"""Callback secrets stay out of what is logged (issue #32, finding 8): Ray logs the application's arguments when it
imports it, so the secrets come from the environment or a file (``PORTRAIT_CALLBACK_SECRET``,
``args.jobs.callback_secret_file``; per key ``callback_secret_env``/``_file``, or the key's entry in ``keys_file``); one
still given inline works, with a warning that says where it belongs; and no repr or dump of the config shows one."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from deployments.common.errors import InvalidParameter
from serve_app.app import AppArgs
from serve_app.auth import AuthConfig, hash_key, load_keys
from serve_app.cli import main
from serve_app.jobs import JOBS
from serve_app.runner.jobs_config import JobsConfig
from serve_app.runner.jobs_runner import JobsRunner
from serve_app.runner.jobs_store import JobStore

REPO_ROOT = Path(__file__).resolve().parents[3]
APP_SECRET, ACME_SECRET, INLINE_SECRET = "app-5ecret-from-a-file", "acme-5ecret-from-env", "inl1ne-5ecret"
CALLBACK_SECRET_ENV = "PORTRAIT_CALLBACK_SECRET"  # the documented name
SHIPPED = ["configs/local.yaml", "configs/gpu.yaml", "configs/cluster-cpu.yaml"]


def ray_logs(args: dict) -> str:
    """What Ray's controller logs when it imports the app (ray/serve/_private/application_state.py)."""
    return f"Importing application 'portrait' with arguments {args}."


def runner_of(config: JobsConfig, auth: AuthConfig, tmp_path: Path) -> JobsRunner:
    store = JobStore(config.location(tmp_path), config.s3, JOBS)
    return JobsRunner(config, store, load_keys(auth), post=lambda *a: None)


def test_callback_secrets_from_the_environment_or_a_file_sign_and_appear_in_no_logged_args(
    tmp_path, monkeypatch, caplog
):
    (tmp_path / "callback-secret").write_text(APP_SECRET + "\n")  # a mounted secret, newline and all
    monkeypatch.setenv("PORTRAIT_ACME_CALLBACK_SECRET", ACME_SECRET)
    acme = {"id": "acme", "sha256": hash_key("pk_a"), "callback_secret_env": "PORTRAIT_ACME_CALLBACK_SECRET"}
    args = {
        "jobs": {"store": str(tmp_path / "jobs"), "callback_secret_file": str(tmp_path / "callback-secret")},
        "auth": {"keys": [acme]},
    }
    with caplog.at_level(logging.WARNING):
        options = AppArgs.model_validate(args)
    runner = runner_of(options.jobs, options.auth, tmp_path)
    assert runner.callback_secret("acme") == ACME_SECRET  # the key's own
    assert runner.callback_secret("anonymous") == APP_SECRET  # the app's, for keys without one
    shown = [ray_logs(args), repr(options), options.model_dump_json(), repr(load_keys(options.auth).by_id("acme"))]
    shown += [record.getMessage() for record in caplog.records]
    assert not [text for text in shown if APP_SECRET in text or ACME_SECRET in text]
    assert not caplog.records  # nothing inline: nothing to warn about


def test_the_app_secret_may_come_from_portrait_callback_secret(tmp_path, monkeypatch):
    monkeypatch.setenv(CALLBACK_SECRET_ENV, APP_SECRET)
    config = JobsConfig(store=str(tmp_path / "jobs"))
    assert runner_of(config, AuthConfig(), tmp_path).callback_secret("anonymous") == APP_SECRET
    assert APP_SECRET not in ray_logs({"jobs": {"store": config.store}})


def test_an_inline_secret_still_signs_and_warns_where_to_put_it_without_showing_it(tmp_path, caplog):
    args = {
        "jobs": {"store": str(tmp_path / "jobs"), "callback_secret": INLINE_SECRET},
        "auth": {"keys": [{"id": "acme", "sha256": hash_key("pk_a"), "callback_secret": INLINE_SECRET + "-acme"}]},
    }
    with caplog.at_level(logging.WARNING):
        options = AppArgs.model_validate(args)
    runner = runner_of(options.jobs, options.auth, tmp_path)
    assert (runner.callback_secret("acme"), runner.callback_secret("anonymous")) == (
        INLINE_SECRET + "-acme",
        INLINE_SECRET,
    )
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any("args.jobs.callback_secret" in text and CALLBACK_SECRET_ENV in text for text in warnings), warnings
    assert any("['acme']" in text and "callback_secret_env" in text and "keys_file" in text for text in warnings)
    assert not [text for text in warnings if INLINE_SECRET in text]
    for shown in (repr(options), options.model_dump_json(), str(options.model_dump()), repr(options.jobs)):
        assert INLINE_SECRET not in shown
    assert INLINE_SECRET not in repr(load_keys(options.auth).by_id("acme"))


def test_a_key_in_keys_file_keeps_its_secret_there_without_a_warning(tmp_path, caplog):
    keys_file = tmp_path / "keys.yaml"
    keys_file.write_text(yaml.safe_dump([{"id": "acme", "sha256": hash_key("pk_a"), "callback_secret": ACME_SECRET}]))
    with caplog.at_level(logging.WARNING):
        auth = AuthConfig.model_validate({"keys_file": str(keys_file)})
        key = load_keys(auth).by_id("acme")
    assert key.callback_secret.get_secret_value() == ACME_SECRET
    assert not caplog.records and ACME_SECRET not in repr(key)


@pytest.mark.parametrize(
    ("jobs", "env", "problem"),
    [
        ({"callback_secret": INLINE_SECRET}, {CALLBACK_SECRET_ENV: APP_SECRET}, "is given 2 ways"),
        ({"callback_secret_file": "/nonexistent/secret"}, {}, "cannot be read"),
        ({}, {CALLBACK_SECRET_ENV: "  "}, "is blank"),
    ],
)
def test_a_secret_given_twice_blank_or_unreadable_stops_the_start_without_showing_it(
    tmp_path, monkeypatch, jobs, env, problem
):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = JobsConfig(store=str(tmp_path / "jobs"), **jobs)
    with pytest.raises(InvalidParameter, match=problem) as refused:
        config.signing_secret()
    assert INLINE_SECRET not in str(refused.value) and APP_SECRET not in str(refused.value)


def test_a_key_naming_an_unset_environment_variable_stops_the_start(monkeypatch):
    monkeypatch.delenv("PORTRAIT_NOBODY_SECRET", raising=False)
    auth = AuthConfig(
        keys=[{"id": "acme", "sha256": hash_key("pk_a"), "callback_secret_env": "PORTRAIT_NOBODY_SECRET"}]
    )
    with pytest.raises(InvalidParameter, match="key 'acme'.*PORTRAIT_NOBODY_SECRET is not set"):
        load_keys(auth)


@pytest.mark.parametrize("relative", SHIPPED)
def test_no_shipped_serve_config_carries_a_callback_secret_in_its_args(relative):
    config = yaml.safe_load((REPO_ROOT / relative).read_text(encoding="utf-8"))
    for application in config["applications"]:
        args = application.get("args") or {}
        assert "callback_secret" not in (args.get("jobs") or {})
        assert not [key for key in (args.get("auth") or {}).get("keys", []) if "callback_secret" in key]


def test_keys_create_with_a_callback_secret_names_keys_file_not_the_serve_args(capsys):
    assert main(["keys", "create", "--id", "acme", "--callback-secret"]) == 0
    _, label, *entry = capsys.readouterr().out.splitlines()
    assert label == "entry for args.auth.keys_file (a mounted secret; not args.auth.keys, which Ray logs):"
    (printed,) = yaml.safe_load("\n".join(entry))
    assert len(printed["callback_secret"]) == 64
