"""The Renderer on tiny random SDXL and FLUX.2 [klein] parts: pulled file by file from a folder mirror through the
manifest, loaded from the store with ``local_files_only``, rendered on the CPU at 32-96 px in 2 steps."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
import torch

pytest.importorskip("diffusers")

from deployments.common.batching import Progress  # noqa: E402
from deployments.common.download import pull  # noqa: E402
from deployments.common.errors import InvalidParameter, ModelUnavailable, RequestTimeout  # noqa: E402
from deployments.common.weights import ModelState, ModelStore, load_manifest  # noqa: E402
from deployments.render import predictor as predictor_module  # noqa: E402
from deployments.render.predictor import RendererOptions, RendererPredictor  # noqa: E402
from deployments.render.types import Condition, RenderRequest, lora_set_parts  # noqa: E402
from tests.unit.render.tiny_sdxl import (  # noqa: E402
    ADAPTER,
    CONTROLNET,
    FLUX2,
    INSTRUCT,
    LORA,
    LORA_B,
    SDXL,
    build_mirror,
)

SIZE = 32
PROMPTS = ("a portrait of a smiling woman", "a man in a blue suit", "studio light photo", "a red portrait")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    return root, load_manifest(build_mirror(root))


@pytest.fixture(scope="module")
def store(mirror, tmp_path_factory):
    root, manifest = mirror
    store = ModelStore(tmp_path_factory.mktemp("store"), manifest)
    outcomes = pull(store, [SDXL, INSTRUCT, CONTROLNET, LORA, LORA_B, ADAPTER, FLUX2], mirror=str(root))
    assert [outcome.error for outcome in outcomes] == [None] * 7
    return store


@pytest.fixture(scope="module")
def renderer(store):
    predictor = RendererPredictor(store, RendererOptions(device="cpu"))
    calls: list[tuple[int, np.ndarray]] = []
    original = predictor._call_pipeline

    def counted(pipeline, kwargs):
        images = original(pipeline, kwargs)
        calls.append((len(kwargs["prompt"]), images))
        return images

    predictor._call_pipeline = counted
    predictor.calls = calls
    return predictor


def request(prompt: str = PROMPTS[0], **fields) -> RenderRequest:
    values = {"model": SDXL, "width": SIZE, "height": SIZE, "steps": 2, "guidance": 5.0, "seed": 7, **fields}
    return RenderRequest(prompt=prompt, **values)


def pose(seed: int, size: int = SIZE) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)


def test_a_folder_entry_is_pulled_file_by_file_and_verified(mirror, store):
    root, manifest = mirror
    spec = manifest[SDXL]
    assert store.status(SDXL).state is ModelState.PRESENT
    assert (store.local_path(SDXL) / "model_index.json").is_file()
    assert {part.file for part in spec.parts} >= {f"generative/{SDXL}/unet/config.json"}
    assert (store.local_root / spec.parts[0].file).with_name("model_index.json.source.json").is_file()
    # one altered file makes the whole entry unusable, naming the pull that fixes it
    other = ModelStore(store.local_root, manifest)
    target = store.local_root / f"generative/{SDXL}/unet/config.json"
    original = target.read_bytes()
    try:
        target.write_bytes(original.replace(b"{", b"{ ", 1))
        status = other.status(SDXL)
        assert status.state is ModelState.SIZE_MISMATCH
        assert status.fix == f"portrait models pull {SDXL}"
    finally:
        target.write_bytes(original)


def assert_each_as_when_alone(renderer, together: np.ndarray, items) -> None:
    """Each item's image of a batched call equals the image of the item rendered alone (the pipeline's float output)."""
    for index, item in enumerate(items):
        renderer.calls.clear()
        renderer.render([item])
        np.testing.assert_allclose(together[index], renderer.calls[0][1][0], atol=1e-5, rtol=0)


def test_a_render_answers_an_image_of_the_requested_size(renderer):
    item = request(width=48, height=32)
    renderer.admit(item)
    (rendered,) = renderer.render([item])
    assert rendered.image.shape == (32, 48, 3) and rendered.image.dtype == np.uint8
    assert rendered.seed == 7
    assert [engine.weights for engine in rendered.engines] == [SDXL] and rendered.batch_size == 1
    assert set(rendered.timings_ms) == {"load", "render"}


def test_one_compatibility_key_is_one_pipeline_call_equal_to_single_calls(renderer):
    items = [request(prompt, seed=seed, negative_prompt="blue" * (seed % 2)) for seed, prompt in enumerate(PROMPTS)]
    assert len({item.compatibility_key() for item in items}) == 1
    renderer.calls.clear()
    batched = renderer.render(items)
    assert [size for size, _ in renderer.calls] == [4]
    together = renderer.calls[0][1]
    for index, item in enumerate(items):
        renderer.calls.clear()
        (alone,) = renderer.render([item])
        np.testing.assert_allclose(together[index], renderer.calls[0][1][0], atol=1e-5, rtol=0)
        assert np.abs(alone.image.astype(int) - batched[index].image.astype(int)).max() <= 1
        assert batched[index].seed == index


def test_controlnet_conditions_batch_per_item_and_keys_split_groups(renderer):
    conditioned = [
        request(prompt, seed=i, conditions=(Condition(CONTROLNET, pose(i), 0.8),))
        for i, prompt in enumerate(PROMPTS[:2])
    ]
    other_size = request(width=40)
    other_steps = dataclasses.replace(request(), steps=3)
    renderer.calls.clear()
    results = renderer.render([conditioned[0], other_size, conditioned[1], other_steps])
    assert sorted(size for size, _ in renderer.calls) == [1, 1, 2]
    assert results[1].image.shape == (SIZE, 40, 3)
    together = next(images for size, images in renderer.calls if size == 2)
    assert_each_as_when_alone(renderer, together, conditioned)


def test_two_controlnets_take_per_item_conditions_in_one_call(renderer):
    items = [
        request(
            prompt, seed=i, conditions=(Condition(CONTROLNET, pose(i), 0.7), Condition(CONTROLNET, pose(9 - i), 0.3))
        )
        for i, prompt in enumerate(PROMPTS[:2])
    ]
    renderer.calls.clear()
    renderer.render(items)
    assert [size for size, _ in renderer.calls] == [2]
    assert_each_as_when_alone(renderer, renderer.calls[0][1], items)


def test_a_render_names_every_model_it_ran(renderer):
    item = request(
        conditions=(Condition(CONTROLNET, pose(3), 0.5),),
        adapter_image=pose(4, 40),
        adapter_scale=0.5,
        loras=((LORA, 0.8),),
    )
    (rendered,) = renderer.render([item])
    assert [engine.weights for engine in rendered.engines] == [SDXL, CONTROLNET, LORA, ADAPTER]
    assert all(engine.weights_state for engine in rendered.engines)


def test_a_lora_set_is_its_own_group_and_off_again_after(renderer):
    base = request()
    with_lora = request(loras=((LORA, 1.0),))
    assert base.compatibility_key() != with_lora.compatibility_key()
    renderer.calls.clear()
    before = renderer.render([base])[0].image
    plain, styled = renderer.render([base, with_lora])
    assert len(renderer.calls) == 3  # the single base call, then one per group
    assert np.abs(styled.image.astype(int) - plain.image.astype(int)).max() > 0
    np.testing.assert_array_equal(plain.image, before)
    np.testing.assert_array_equal(renderer.render([base])[0].image, before)


def test_a_lora_set_is_named_by_its_base_and_loras_whatever_their_order_or_weights():
    mixed = request(loras=((LORA_B, 0.5), (LORA, 1.0)))
    assert mixed.lora_set == f"{SDXL}:{LORA},{LORA_B}" == request(loras=((LORA, 0.2), (LORA_B, 0.9))).lora_set
    assert lora_set_parts(mixed.lora_set) == (SDXL, (LORA, LORA_B))
    assert request().lora_set == ""  # no LoRAs: not multiplexed


def test_two_lora_sets_load_once_each_however_their_requests_alternate(store):
    predictor = RendererPredictor(store, RendererOptions(device="cpu"))
    looks = [request(loras=((LORA, 1.0),)), request(loras=((LORA_B, 1.0),))]
    first = [predictor.render([item])[0].image for item in looks]
    for _ in range(2):
        for item, image in zip(looks, first):
            np.testing.assert_array_equal(predictor.render([item])[0].image, image)
    assert np.abs(first[0].astype(int) - first[1].astype(int)).max() > 0
    assert predictor.health()["lora_set_loads"] == 2
    assert predictor.health()["lora_sets"] == [item.lora_set for item in looks]


def test_a_dropped_set_leaves_a_set_sharing_its_lora_alone_and_draws_the_same_when_loaded_again(store):
    predictor = RendererPredictor(store, RendererOptions(device="cpu"))
    both, one = request(loras=((LORA, 0.8), (LORA_B, 0.5))), request(loras=((LORA, 0.8),))
    both_before, one_before = (predictor.render([item])[0].image for item in (both, one))
    predictor.unload_lora_set(both.lora_set)
    assert predictor.health()["lora_sets"] == [one.lora_set]
    np.testing.assert_array_equal(predictor.render([one])[0].image, one_before)
    np.testing.assert_array_equal(predictor.render([both])[0].image, both_before)
    assert predictor.health()["lora_set_loads"] == 3
    predictor.unload_lora_set("not-held")  # a set the multiplexer evicts twice, or never held: nothing happens


def test_beyond_its_bound_a_replica_drops_the_least_recently_used_set(store, monkeypatch):
    monkeypatch.setattr(predictor_module, "LORA_SETS_PER_REPLICA", 2)
    predictor = RendererPredictor(store, RendererOptions(device="cpu"))
    first, second, third = (
        request(loras=loras) for loras in (((LORA, 1.0),), ((LORA_B, 1.0),), ((LORA, 1.0), (LORA_B, 1.0)))
    )
    plain = predictor.render([request()])[0].image
    predictor.load_lora_set(first.lora_set)
    predictor.load_lora_set(second.lora_set)
    predictor.load_lora_set(first.lora_set)  # used again: the second is now the oldest
    predictor.load_lora_set(third.lora_set)
    assert predictor.health()["lora_sets"] == [first.lora_set, third.lora_set]
    assert predictor.health()["lora_set_loads"] == 3
    np.testing.assert_array_equal(predictor.render([request()])[0].image, plain)  # held sets stay off elsewhere


def test_each_request_hears_every_step_of_its_own_pipeline_call(renderer):
    txt, img = request(steps=3), request(kind="img2img", image=pose(5), strength=0.5, steps=4)
    heard: list[tuple[RenderRequest, Progress]] = []
    renderer.render([txt, img], on_progress=lambda item, progress: heard.append((item, progress)))
    assert [progress for item, progress in heard if item is txt] == [Progress(1, 3), Progress(2, 3), Progress(3, 3)]
    assert [progress for item, progress in heard if item is img] == [Progress(1, 2), Progress(2, 2)]  # 4 × 0.5
    assert (txt.steps_to_run, img.steps_to_run) == (3, 2)


def test_an_edit_hears_its_steps_too(store):
    predictor = RendererPredictor(store, RendererOptions(device="cpu"))
    edit = request(kind="instruct", model=INSTRUCT, image=pose(6), steps=2)
    heard: list[Progress] = []
    predictor.render([edit], on_progress=lambda item, progress: heard.append(progress))
    assert heard == [Progress(1, 2), Progress(2, 2)]


def test_a_render_nobody_waits_for_stops_between_steps(renderer):
    late = request(deadline_unix_s=time.time() - 1)
    with pytest.raises(RequestTimeout):
        renderer.render([late])
    in_time = request(deadline_unix_s=time.time() + 600)
    heard: list[Progress] = []
    renderer.render([in_time, late], on_progress=lambda item, progress: heard.append(progress))
    assert heard[-1] == Progress(2, 2)  # one of the group still waits: it runs to the end


def test_adapter_faces_are_per_item_and_scale_zero_equals_no_adapter(store, renderer):
    plain = RendererPredictor(store, RendererOptions(device="cpu")).render([request()])[0].image
    faces = [
        request(prompt, seed=i, adapter_image=pose(20 + i, 40), adapter_scale=0.7)
        for i, prompt in enumerate(PROMPTS[:2])
    ]
    renderer.calls.clear()
    renderer.render(faces)
    assert [size for size, _ in renderer.calls] == [2]
    assert_each_as_when_alone(renderer, renderer.calls[0][1], faces)
    # the adapter loaded, a request without a face (or at scale 0) renders as without the adapter
    np.testing.assert_array_equal(renderer.render([request()])[0].image, plain)
    zero = renderer.render([request(adapter_image=pose(30, 40), adapter_scale=0.0)])[0].image
    np.testing.assert_array_equal(zero, plain)


def test_img2img_and_inpaint_render_at_the_start_images_size(renderer):
    start = pose(11)
    mask = np.zeros((SIZE, SIZE), np.uint8)
    mask[8:24, 8:24] = 255
    img2img = request(kind="img2img", image=start, strength=0.6)
    inpaint = request(kind="inpaint", image=start, mask=mask, strength=1.0)
    for item in (img2img, inpaint):
        renderer.admit(item)
    results = renderer.render([img2img, inpaint])
    assert [result.image.shape for result in results] == [(SIZE, SIZE, 3)] * 2


def test_admission_refuses_what_the_pipeline_must_not_run(renderer):
    with pytest.raises(InvalidParameter, match="multiples of 8"):
        renderer.admit(request(width=36))
    with pytest.raises(InvalidParameter, match="unknown controlnet"):
        renderer.admit(request(conditions=(Condition("nope", pose(0), 1.0),)))
    with pytest.raises(InvalidParameter, match="start image"):
        renderer.admit(request(kind="img2img"))
    with pytest.raises(InvalidParameter, match="unknown lora"):
        renderer.admit(request(loras=((SDXL, 1.0),)))


def test_a_missing_model_is_a_503_naming_the_pull_command(mirror, tmp_path):
    _, manifest = mirror
    predictor = RendererPredictor(ModelStore(tmp_path, manifest), RendererOptions(device="cpu"))
    item = request()
    predictor.admit(item)  # known, just not fetched
    with pytest.raises(ModelUnavailable) as raised:
        predictor.render([item])
    assert raised.value.http_status == 503 and raised.value.code == "model_unavailable"
    assert f"portrait models pull {SDXL}" in raised.value.message
    assert "--group generative" in raised.value.message
    assert predictor.health()["not_loaded"] == [SDXL, INSTRUCT, CONTROLNET, ADAPTER, LORA, LORA_B, FLUX2]


def test_an_instruct_edit_keeps_the_photos_size_and_batches_equal_to_single_calls(renderer):
    photo = pose(12, 48)
    items = [
        request(prompt, kind="instruct", model=INSTRUCT, image=photo, width=48, seed=i, image_guidance=1.5)
        for i, prompt in enumerate(PROMPTS[:2])
    ]
    renderer.calls.clear()
    edited = renderer.render(items)
    assert [size for size, _ in renderer.calls] == [1 + 1] and edited[0].image.shape == (SIZE, 48, 3)
    assert [engine.weights for engine in edited[0].engines] == [INSTRUCT]
    assert_each_as_when_alone(renderer, renderer.calls[0][1], items)


def test_an_instruct_edit_needs_an_editor_and_takes_no_controlnet(renderer):
    with pytest.raises(InvalidParameter, match="unknown editor model"):
        renderer.admit(request(kind="instruct", image=pose(1)))  # the generator is not an editor
    with pytest.raises(InvalidParameter, match="no ControlNet"):
        renderer.admit(
            request(kind="instruct", model=INSTRUCT, image=pose(1), conditions=(Condition(CONTROLNET, pose(2)),))
        )


def reference_edit(prompt: str = PROMPTS[0], photo: np.ndarray | None = None, **fields) -> RenderRequest:
    photo = pose(13, 64) if photo is None else photo
    values = {"kind": "reference_edit", "model": FLUX2, "image": photo, "height": 64, "width": photo.shape[1]}
    return request(prompt, **values | {"guidance": 1.0} | fields)


def test_a_reference_edit_keeps_the_photos_size_and_each_item_edits_its_own_photo(renderer):
    wide = [pose(14 + i, 96)[:64] for i in range(2)]
    items = [reference_edit(prompt, wide[i], seed=i) for i, prompt in enumerate(PROMPTS[:2])]
    for item in items:
        renderer.admit(item)
    renderer.calls.clear()
    edited = renderer.render(items)
    assert [size for size, _ in renderer.calls] == [2]
    assert [result.image.shape for result in edited] == [(64, 96, 3)] * 2
    assert [engine.weights for engine in edited[0].engines] == [FLUX2]
    assert_each_as_when_alone(renderer, renderer.calls[0][1], items)  # diffusers alone would give each both photos


def test_a_reference_edit_draws_the_same_image_from_the_same_seed(renderer):
    first, again, other = (renderer.render([reference_edit(seed=seed)])[0].image for seed in (3, 3, 4))
    np.testing.assert_array_equal(first, again)
    assert np.abs(first.astype(int) - other.astype(int)).max() > 0


def test_a_reference_edit_hears_its_steps_and_stops_when_nobody_waits(renderer):
    heard: list[Progress] = []
    renderer.render([reference_edit(steps=3)], on_progress=lambda item, progress: heard.append(progress))
    assert heard == [Progress(1, 3), Progress(2, 3), Progress(3, 3)]
    with pytest.raises(RequestTimeout):
        renderer.render([reference_edit(deadline_unix_s=time.time() - 1)])


def test_a_reference_edit_needs_a_flux2_editor_and_its_grid(renderer):
    with pytest.raises(InvalidParameter, match=f"unknown reference editor model '{INSTRUCT}'; known: {FLUX2}"):
        renderer.admit(reference_edit(model=INSTRUCT))
    with pytest.raises(InvalidParameter, match=f"unknown editor model '{FLUX2}'; known: {INSTRUCT}"):
        renderer.admit(request(kind="instruct", model=FLUX2, image=pose(1)))
    with pytest.raises(InvalidParameter, match="multiples of 16 from 64 px"):
        renderer.admit(reference_edit(photo=pose(2, 72)[:64]))
    with pytest.raises(InvalidParameter, match="8× its short side"):
        renderer.admit(reference_edit(photo=pose(3, 528)[:64]))
    with pytest.raises(InvalidParameter, match="no negative prompt"):
        renderer.admit(reference_edit(negative_prompt="blue"))
    with pytest.raises(InvalidParameter, match="no ControlNet"):
        renderer.admit(reference_edit(loras=((LORA, 1.0),)))


def test_a_half_precision_replica_keeps_its_dtype_and_runs_flux2_in_bfloat16(store):
    predictor = RendererPredictor(store, RendererOptions(device="cpu", dtype="float16"))
    ran: list = []
    original = predictor._call_pipeline
    predictor._call_pipeline = lambda pipeline, kwargs: ran.append(pipeline) or original(pipeline, kwargs)
    predictor.render([request(kind="img2img", image=pose(8), strength=0.5)])
    predictor.render([reference_edit()])
    sdxl, flux = ran  # each group's pipeline shares its base's modules: what it runs in, the base is in
    assert {sdxl.unet.dtype, sdxl.vae.dtype, sdxl.text_encoder.dtype} == {torch.float16}
    assert {flux.transformer.dtype, flux.vae.dtype, flux.text_encoder.dtype} == {torch.bfloat16}


def test_a_render_over_the_tiling_size_decodes_tile_by_tile_and_a_small_one_whole_again(store):
    predictor = RendererPredictor(store, RendererOptions(device="cpu", vae_tiling_megapixels=0.002))
    large, small = request(width=64, height=64), request()  # 4096 px over the bar; SIZE² = 1024 under it
    assert predictor.render([large])[0].image.shape == (64, 64, 3)
    vae = predictor._bases[SDXL].pipeline.vae
    assert vae.use_tiling
    assert predictor.render([small])[0].image.shape == (SIZE, SIZE, 3)
    assert not vae.use_tiling


def test_compile_makes_each_models_denoiser_a_compiled_module(store):
    import torch

    predictor = RendererPredictor(store, RendererOptions(device="cpu", compile=True))
    predictor.load_lora_set(f"{SDXL}:{LORA}")  # loads the base (LoRAs go onto the compiled UNet's modules)
    assert isinstance(predictor._bases[SDXL].pipeline.unet, torch._dynamo.eval_frame.OptimizedModule)
