"""Fixtures for the ID-photo tests."""

from __future__ import annotations

import pytest
from idphoto_samples import SyntheticPortrait, draw_portrait

from deployments.idphoto.specs import default_specs


@pytest.fixture(scope="session")
def portrait() -> SyntheticPortrait:
    return draw_portrait()


@pytest.fixture(scope="session")
def specs():
    return default_specs()
