"""A prompt instead of task + params where jobs are configured: bucket routes and ``portrait process --prompt``."""

from __future__ import annotations

import json

import pytest

from deployments.common.errors import InvalidParameter
from serve_app.cli import main
from serve_app.instructions import InstructionUnclear
from serve_app.runner.routing import build_routing_table
from storage.local import LocalStore


def _route(tmp_path, **fields) -> dict:
    return {"name": "drop", "input": str(tmp_path / "in"), "output": str(tmp_path / "out"), **fields}


def test_a_route_prompt_becomes_its_task_and_default_params(tmp_path, job_ctx):
    [route] = build_routing_table([_route(tmp_path, prompt="蓝底一寸证件照，不超过50KB")], job_ctx).routes
    assert route.task == "idphoto"
    assert dict(route.default_fields) == {"spec": "cn-1inch", "background": "#628bce", "max_kb": 50}
    assert (route.params.spec, route.params.max_kb) == ("cn-1inch", 50)


def test_a_routes_own_params_win_over_its_prompt(tmp_path, job_ctx):
    [route] = build_routing_table(
        [_route(tmp_path, prompt="蓝底一寸证件照", params={"background": "white"})], job_ctx
    ).routes
    assert dict(route.default_fields) == {"spec": "cn-1inch", "background": "white"}


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"prompt": "你好"}, InstructionUnclear, "route 'drop': prompt: the prompt names no job"),
        ({"prompt": "修复", "task": "restore"}, InvalidParameter, "a task .* or a prompt"),
        ({}, InvalidParameter, "a task .* or a prompt"),
        ({"prompt": "放大3倍"}, InvalidParameter, "route 'drop': prompt: understood job restore"),
    ],
)
def test_a_route_with_a_bad_or_doubled_job_is_refused_at_start_up(tmp_path, job_ctx, fields, error, message):
    with pytest.raises(error, match=message):
        build_routing_table([_route(tmp_path, **fields)], job_ctx)


def test_portrait_process_takes_a_prompt(tmp_path, mediapipe_dir, photo_jpeg, monkeypatch, capsys):
    monkeypatch.setenv("PORTRAIT_MODEL_STORE", str(mediapipe_dir.parent))
    LocalStore(tmp_path / "in").put("me.jpg", photo_jpeg, content_type="image/jpeg")
    argv = ["process", str(tmp_path / "in"), "--prompt", "白底二寸证件照", "--local", "--out", str(tmp_path / "o")]
    assert main([*argv, "--params", '{"max_kb": 80}']) == 0
    err = capsys.readouterr().err
    assert 'idphoto {"spec": "cn-2inch", "background": "#ffffff", "max_kb": 80}: job idphoto: named by "证件照"' in err
    out = LocalStore(tmp_path / "o")
    record = json.loads(out.get("me.json", max_bytes=1 << 20).data)
    assert (record["task"], record["params"]["spec"], record["params"]["max_kb"]) == ("idphoto", "cn-2inch", 80)
    assert main(["process", str(tmp_path / "in"), "--prompt", "hello", "--local"]) == 2
    assert "process failed: the prompt names no job" in capsys.readouterr().err


def test_portrait_process_wants_a_task_or_a_prompt_not_both(tmp_path):
    with pytest.raises(SystemExit):
        main(["process", str(tmp_path), "--task", "restore", "--prompt", "修复"])
    with pytest.raises(SystemExit):
        main(["process", str(tmp_path)])
