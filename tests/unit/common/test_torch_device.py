"""Mixed precision is one table and one check (``deployments.common.torch_device``): every torch predictor's options
take the same ``autocast_dtype`` values and refuse the same others, and the dtype applies on CUDA only."""

from __future__ import annotations

import pytest
import torch

from deployments.colorize.predictor import ColorizerOptions
from deployments.common.errors import InvalidParameter
from deployments.common.torch_device import AUTOCAST_DTYPES, TorchOptions, autocast_dtype
from deployments.idphoto.predictor import MatterOptions
from deployments.restore.restorer import RestorerOptions

OPTIONS = (ColorizerOptions, MatterOptions, RestorerOptions)


@pytest.mark.parametrize("options", OPTIONS, ids=[options.__name__ for options in OPTIONS])
def test_every_torch_predictor_takes_the_same_autocast_dtypes(options):
    assert issubclass(options, TorchOptions)
    for name in (None, *AUTOCAST_DTYPES):
        assert options(autocast_dtype=name).autocast_dtype == name
    with pytest.raises(InvalidParameter, match=r"autocast_dtype must be one of \['bfloat16', 'float16'\] or null"):
        options(autocast_dtype="float32")


def test_the_autocast_dtype_applies_on_cuda_only():
    assert autocast_dtype("bfloat16", torch.device("cuda")) is torch.bfloat16
    assert autocast_dtype("float16", torch.device("cuda", 1)) is torch.float16
    assert autocast_dtype("bfloat16", torch.device("cpu")) is None
    assert autocast_dtype(None, torch.device("cuda")) is None
    with pytest.raises(InvalidParameter, match="autocast_dtype"):
        autocast_dtype("int8", torch.device("cpu"))
