"""``PORTRAIT_MODELS_MIRROR=s3://bucket/prefix``: model files come from a bucket through the store code.

The endpoint comes from ``AWS_ENDPOINT_URL``, as it would for a MinIO mirror inside a closed network.
"""

from __future__ import annotations

import hashlib
import uuid

import pytest
import yaml

from deployments.common.download import pull, read_provenance
from deployments.common.weights import ModelState, ModelStore, load_manifest

pytestmark = pytest.mark.slow

WEIGHTS = b"weights kept in a company bucket" * 100


def test_an_s3_mirror_serves_the_manifest_paths_and_names_what_it_lacks(moto_server, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto_server.secret_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", moto_server.region)
    bucket = f"models-{uuid.uuid4().hex[:12]}"
    moto_server.client().create_bucket(Bucket=bucket)
    moto_server.client().put_object(Bucket=bucket, Key="portrait/v1/toy/toy.pth", Body=WEIGHTS)
    entry = {"task": "t", "architecture": "a", "engine": "e", "license": "Apache-2.0", "url": "https://x.invalid/f"}
    models = {
        "toy": entry | {"file": "toy/toy.pth", "sha256": hashlib.sha256(WEIGHTS).hexdigest()},
        "absent": entry | {"file": "absent/absent.pth"},
    }
    (tmp_path / "models.yaml").write_text(yaml.safe_dump({"models": models}), encoding="utf-8")
    store = ModelStore(tmp_path / "store", load_manifest(tmp_path / "models.yaml"))

    toy, absent = pull(store, ["toy", "absent"], mirror=f"s3://{bucket}/portrait/v1")

    assert toy.status.state is ModelState.PRESENT and store.local_path("toy").read_bytes() == WEIGHTS
    assert read_provenance(store.local_path("toy")).source == f"s3://{bucket}/portrait/v1/toy/toy.pth"
    assert absent.error.message == f"absent: not in the mirror (s3://{bucket}/portrait/v1/absent/absent.pth)"
    left = sorted(path.name for path in (tmp_path / "store").rglob("*") if path.is_file())
    assert left == ["toy.pth", "toy.pth.source.json"]
