"""The looks on a real photo through the real models: each touch-up changes the person, never one background pixel;
the before/after strip is saved for a look under ``test-output/idphoto/looks_astronaut.png``."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from deployments.faces.analyze import FaceAnalysisPredictor
from deployments.idphoto.params import parse_params
from deployments.idphoto.pipeline import make_id_photo

OUTPUT_DIR = Path(__file__).resolve().parents[3] / "test-output" / "idphoto"
LOOKS = (
    {},
    {"whitening_strength": 10},
    {"brightness_strength": 15},
    {"contrast_strength": 30},
    {"saturation_strength": 40},
    {"sharpen_strength": 4},
    {"horizontal_flip": True},
    {"background_image": "studio-blue", "background": None},
    {"watermark_text": "ID ONLY", "watermark_opacity": 0.3},
)


def test_looks_on_the_astronaut_change_the_person_and_never_the_background(matter, mediapipe_dir, astronaut_rgb):
    faces = FaceAnalysisPredictor(mediapipe_dir).analyze(astronaut_rgb)
    low = matter.segment(astronaut_rgb, "modnet")

    def photo(mode: str = "RGB", **options) -> np.ndarray:
        params = parse_params({"format": "png", "background": "blue", **options})
        outcome = make_id_photo(astronaut_rgb, faces, low, params)
        return np.asarray(Image.open(io.BytesIO(outcome.photo)).convert(mode))

    alpha = photo("RGBA", background="transparent")[..., 3]
    plain = photo()
    strip = []
    for options in LOOKS:
        looked = photo(**options)
        strip.append(looked)
        if options and not {"horizontal_flip", "background_image", "watermark_text"} & set(options):
            assert (looked[alpha == 0] == (0x62, 0x8B, 0xCE)).all(), options
            assert np.abs(looked[alpha == 255].astype(int) - plain[alpha == 255]).mean() > 2, options
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.hstack(strip)).save(OUTPUT_DIR / "looks_astronaut.png")
    assert (alpha == 0).mean() > 0.2 and (alpha == 255).mean() > 0.2
