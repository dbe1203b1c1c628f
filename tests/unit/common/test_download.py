"""Downloads users can trust: verified before they get their name, resumed, retried, timed out, mirrored, recorded.

Everything runs against a file server on 127.0.0.1 (``tests/http_files.py``) serving bytes made here; nothing here
reaches the internet. After every failure, neither the file nor a ``.partial`` is left in the store.
"""

from __future__ import annotations

import hashlib
import io
import json
import socket
import stat
from pathlib import Path

import pytest
import yaml

from deployments.common.download import offline_notice, plan_pull, pull, read_provenance, source_for
from deployments.common.errors import InvalidParameter
from deployments.common.transfer import DownloadPolicy, Progress, Source, StreamProgress, unreachable_hosts
from deployments.common.weights import ModelState, ModelStore, load_manifest
from tests.http_files import FileServer, Route

PAYLOAD = bytes(range(256)) * 1200  # 300 KiB, every byte value
SHA256 = hashlib.sha256(PAYLOAD).hexdigest()
FILE = "toy/toy.pth"
QUICK = DownloadPolicy(timeout_s=0.3, attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02)


def _entry(url: str, *, sha256: str | None = SHA256, size_bytes: int | None = len(PAYLOAD), **extra) -> dict:
    return {
        "task": "face_restoration",
        "architecture": "gpen",
        "engine": "gpen",
        "file": FILE,
        "url": url,
        "license": "test-only",
        "sha256": sha256,
        "size_bytes": size_bytes,
        **extra,
    }


def _store(tmp_path: Path, entries: dict[str, dict]) -> ModelStore:
    manifest = tmp_path / "models.yaml"
    manifest.write_text(yaml.safe_dump({"models": entries}), encoding="utf-8")
    return ModelStore(tmp_path / "store", load_manifest(manifest))


def _leftovers(store: ModelStore) -> list[str]:
    return sorted(str(path.relative_to(store.local_root)) for path in store.local_root.rglob("*") if path.is_file())


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture()
def server():
    with FileServer().running() as files:
        yield files


def test_a_download_is_verified_named_and_recorded(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert outcome.ok and outcome.status.state is ModelState.PRESENT
    assert store.local_path("toy").read_bytes() == PAYLOAD
    record = read_provenance(store.local_path("toy"))
    assert (record.model, record.via, record.source) == ("toy", "url", server.url("/toy.pth"))
    assert (record.sha256, record.size_bytes) == (SHA256, len(PAYLOAD))
    assert _leftovers(store) == [FILE, FILE + ".source.json"]


def test_a_present_file_is_not_fetched_again(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})
    pull(store, ["toy"], policy=QUICK)

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert outcome.ok and outcome.source is None
    assert len(server.gets("/toy.pth")) == 1


def test_a_wrong_hash_is_refused_and_removed(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD[:-1] + b"X")
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert outcome.status.state is ModelState.MISSING and not outcome.ok
    assert outcome.error.details["reason"] == "hash-mismatch"
    assert f"does not match the manifest's {SHA256}" in outcome.error.message
    assert _leftovers(store) == []


def test_a_size_the_manifest_does_not_state_is_refused_before_the_body(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD + b"more")
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert f"the server offers {len(PAYLOAD) + 4} bytes, the manifest says {len(PAYLOAD)}" in outcome.error.message
    assert len(server.gets("/toy.pth")) == 1  # not worth a retry
    assert _leftovers(store) == []


def test_a_file_always_cut_short_fails_after_the_retries_and_leaves_nothing(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD, ranges=False, truncate_at=1000)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"), sha256=None, size_bytes=None)})

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert not outcome.ok
    assert outcome.error.message == (
        f"toy: the connection closed after 1000 of {len(PAYLOAD)} bytes (gave up after 3 attempts) at "
        + server.url("/toy.pth")
    )
    assert len(server.gets("/toy.pth")) == 3
    assert _leftovers(store) == []


def test_a_dropped_connection_resumes_with_a_range_request(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD, truncate_at=100_000, truncations=1)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert outcome.ok
    assert store.local_path("toy").read_bytes() == PAYLOAD
    assert [request.range for request in server.gets("/toy.pth")] == [None, "bytes=100000-"]
    assert _leftovers(store) == [FILE, FILE + ".source.json"]


def test_a_server_without_ranges_is_fetched_whole_again(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD, ranges=False, truncate_at=100_000, truncations=1)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert outcome.ok and store.local_path("toy").read_bytes() == PAYLOAD
    assert len(server.gets("/toy.pth")) == 2


def test_a_partial_file_left_by_an_interrupted_run_is_resumed(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})
    partial = store.local_path("toy").with_name("toy.pth.partial")
    partial.parent.mkdir(parents=True)
    partial.write_bytes(PAYLOAD[:12345])

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert outcome.ok and store.local_path("toy").read_bytes() == PAYLOAD
    assert [request.range for request in server.gets("/toy.pth")] == ["bytes=12345-"]
    assert not partial.exists()


def test_a_complete_partial_needs_no_request_only_the_check(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})
    partial = store.local_path("toy").with_name("toy.pth.partial")
    partial.parent.mkdir(parents=True)
    partial.write_bytes(PAYLOAD)

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert outcome.ok and server.requests == []


def test_ctrl_c_keeps_the_partial_and_the_next_run_resumes_it(tmp_path, server):
    class Interrupt(Progress):
        def advanced(self, size_bytes: int) -> None:
            raise KeyboardInterrupt

    server.routes["/toy.pth"] = Route(PAYLOAD, stall_s=0.5, stall_after_bytes=1000, stalls=1)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})
    with pytest.raises(KeyboardInterrupt):
        pull(store, ["toy"], policy=QUICK, progress=Interrupt())
    assert _leftovers(store) == [FILE + ".partial"]
    kept_bytes = store.local_path("toy").with_name("toy.pth.partial").stat().st_size
    assert 0 < kept_bytes <= 1000

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert outcome.ok and store.local_path("toy").read_bytes() == PAYLOAD
    assert [request.range for request in server.gets("/toy.pth")] == [None, f"bytes={kept_bytes}-"]


def test_a_silent_server_times_out_and_leaves_nothing(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD, stall_s=1.0)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert "no answer for 0.3 s" in outcome.error.message and "gave up after 3 attempts" in outcome.error.message
    assert _leftovers(store) == []


def test_a_server_that_stalls_mid_file_times_out_and_leaves_nothing(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD, ranges=False, stall_s=1.0, stall_after_bytes=50_000)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert "no answer for 0.3 s" in outcome.error.message
    assert _leftovers(store) == []


def test_a_404_is_reported_at_once_without_retries(tmp_path, server):
    store = _store(tmp_path, {"toy": _entry(server.url("/absent.pth"))})

    [outcome] = pull(store, ["toy"], policy=QUICK)

    assert outcome.error.message == f"toy: HTTP 404 Not Found at {server.url('/absent.pth')}"
    assert outcome.error.details["http_status"] == 404
    assert len(server.gets("/absent.pth")) == 1
    assert _leftovers(store) == []


def test_a_busy_server_is_retried_with_backoff(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD, unavailable=2)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})
    log = io.StringIO()

    [outcome] = pull(store, ["toy"], policy=QUICK, progress=StreamProgress(log))

    assert outcome.ok and len(server.gets("/toy.pth")) == 3
    assert log.getvalue().splitlines()[:2] == [
        "toy: HTTP 503 Service Unavailable; attempt 2 of 3 in 0.0 s",
        "toy: HTTP 503 Service Unavailable; attempt 3 of 3 in 0.0 s",
    ]


def test_backoff_doubles_up_to_its_cap():
    policy = DownloadPolicy(initial_backoff_s=1.0, max_backoff_s=5.0)
    assert [policy.backoff_s(retry) for retry in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_one_failure_does_not_stop_the_other_models(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = _store(
        tmp_path,
        {"gone": _entry(server.url("/gone.pth")) | {"file": "gone/gone.pth"}, "toy": _entry(server.url("/toy.pth"))},
    )

    gone, toy = pull(store, ["gone", "toy"], policy=QUICK)

    assert "HTTP 404" in gone.error.message and toy.ok


def test_the_mirror_replaces_every_host_with_the_manifest_file_path(tmp_path, server):
    server.routes["/mirror/v1/toy/toy.pth"] = Route(PAYLOAD)
    store = _store(tmp_path, {"toy": _entry(f"http://127.0.0.1:{_closed_port()}/official/toy.pth")})

    [outcome] = pull(store, ["toy"], mirror=server.url("/mirror/v1/"), policy=QUICK)

    assert outcome.ok and store.local_path("toy").read_bytes() == PAYLOAD
    record = read_provenance(store.local_path("toy"))
    assert (record.via, record.source) == ("mirror", server.url("/mirror/v1/toy/toy.pth"))


def test_a_folder_mirror_is_read_through_the_store_code(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / FILE).write_bytes(PAYLOAD)
    store = _store(tmp_path, {"toy": _entry("https://models.invalid/toy.pth")})

    [outcome] = pull(store, ["toy"], mirror=str(mirror), policy=QUICK)

    assert outcome.ok and read_provenance(store.local_path("toy")).source == f"{mirror}/{FILE}"


def test_a_file_missing_from_a_folder_mirror_is_a_clear_error(tmp_path):
    (tmp_path / "mirror").mkdir()
    store = _store(tmp_path, {"toy": _entry("https://models.invalid/toy.pth")})

    [outcome] = pull(store, ["toy"], mirror=str(tmp_path / "mirror"), policy=QUICK)

    assert outcome.error.message == f"toy: not in the mirror ({tmp_path / 'mirror'}/{FILE})"
    assert _leftovers(store) == []


def test_builtins_come_from_the_mirror_too_when_one_is_set(tmp_path):
    spec = load_manifest(Path(__file__).resolve().parents[3] / "configs" / "models.yaml")["face-mesh"]
    assert source_for(spec, None).via == "wheel"
    assert source_for(spec, "https://mirror.example/m").location == (
        "https://mirror.example/m/mediapipe/face_landmark.tflite"
    )


def test_a_mirror_with_an_unsupported_scheme_is_refused(tmp_path):
    store = _store(tmp_path, {"toy": _entry("https://models.invalid/toy.pth")})
    with pytest.raises(InvalidParameter, match="unsupported storage scheme"):
        pull(store, ["toy"], mirror="ftp://mirror.example/models")


def test_progress_on_a_terminal_redraws_one_line_with_bytes_and_rate(tmp_path, server):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})
    screen = Terminal()

    pull(store, ["toy"], policy=QUICK, progress=StreamProgress(screen, min_redraw_s=0.0))

    drawn = screen.getvalue()
    assert "\r\x1b[Ktoy: 0.0 MB / 0.3 MB (0 %)" in drawn and "0.3 MB / 0.3 MB (100 %)" in drawn and "/s" in drawn
    assert drawn.endswith(f" from {server.url('/toy.pth')}\n") and drawn.count("\n") == 1


def test_progress_in_a_log_is_one_line_per_file(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})
    log = io.StringIO()

    pull(store, ["toy"], policy=QUICK, progress=StreamProgress(log))

    [line] = log.getvalue().splitlines()
    assert line.startswith("toy: 0.3 MB in ") and line.endswith(f"MB/s) from {server.url('/toy.pth')}")


def test_the_provenance_record_is_plain_json_beside_the_file(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})
    pull(store, ["toy"], policy=QUICK)

    record = json.loads((store.local_root / (FILE + ".source.json")).read_text())

    assert set(record) == {"model", "via", "source", "fetched_at", "sha256", "size_bytes", "inputs"}
    assert record["fetched_at"].endswith("+00:00") and record["inputs"] == {}  # inputs: for a converted file
    assert stat.S_IMODE((store.local_root / (FILE + ".source.json")).stat().st_mode) == 0o644


# --- make run without network: the probe decides, the notice is one line -------------------------------------------


def test_hosts_that_refuse_or_do_not_resolve_are_unreachable_and_a_live_one_is_not(server):
    refused = f"http://127.0.0.1:{_closed_port()}/a.pth"
    sources = [Source("url", refused), Source("url", "https://models.invalid/b.pth"), Source("url", server.url("/x"))]

    down = unreachable_hosts(sources, timeout_s=2.0)

    assert set(down) == {refused.split("/")[2], "models.invalid"}
    assert down[refused.split("/")[2]] == "Connection refused"


def test_a_host_that_accepts_but_never_answers_is_unreachable_within_the_timeout():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel completes the handshake; nobody ever answers
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        down = unreachable_hosts([Source("url", f"http://{host}/a.pth")], timeout_s=0.3)

    assert down[host] in ("no answer for 0.3 s", "no answer in 0.3 s")


def test_without_network_nothing_is_fetched_and_the_notice_is_one_line(tmp_path):
    port = _closed_port()
    store = _store(
        tmp_path,
        {
            "toy": _entry(f"http://127.0.0.1:{port}/toy.pth"),
            "cartoon": _entry(f"http://127.0.0.1:{port}/c.pb") | {"file": "c/c.pb", "engine": "dctnet"},
        },
    )

    plan = plan_pull(store, ["toy", "cartoon"], mirror=None, timeout_s=1.0)

    assert plan.fetch == [] and [spec.name for spec in plan.offline] == ["toy", "cartoon"]
    assert plan.notice == (
        f"models: no network to 127.0.0.1:{port} (Connection refused); 2 model(s) not fetched (neural engines: "
        "dctnet, gpen), so their jobs run on the non-neural fallbacks. Add them later with "
        "`portrait models pull --default` (or point PORTRAIT_MODELS_MIRROR at a mirror)."
    )


def test_with_a_reachable_mirror_everything_is_fetched_and_there_is_no_notice(tmp_path, server):
    store = _store(tmp_path, {"toy": _entry("https://models.invalid/toy.pth")})

    plan = plan_pull(store, ["toy"], mirror=server.url("/mirror"), timeout_s=1.0)

    assert plan == type(plan)(fetch=["toy"], offline=[], notice=None)


def test_present_models_are_not_probed(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = _store(tmp_path, {"toy": _entry(server.url("/toy.pth"))})
    pull(store, ["toy"], policy=QUICK)

    plan = plan_pull(store, ["toy"], mirror=None, timeout_s=1.0)

    assert plan.fetch == [] and plan.notice is None
    assert [request.method for request in server.requests] == ["GET"]


def test_the_notice_names_every_unreachable_host_and_engine():
    manifest = load_manifest(Path(__file__).resolve().parents[3] / "configs" / "models.yaml")
    notice = offline_notice(
        [manifest["dctnet-anime-head"], manifest["gpen-bfr-512"]], {"www.modelscope.cn": "Name or service not known"}
    )
    assert "\n" not in notice
    assert "no network to www.modelscope.cn (Name or service not known); 2 model(s)" in notice
    assert "(neural engines: dctnet, gpen)" in notice
