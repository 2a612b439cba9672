import os

import pytest
import torch

from .sharding import in_shard, parse_shard

if not torch.cuda.is_available():
    pytest.skip("GPU tests need CUDA (run them on the H200)", allow_module_level=True)


def pytest_collection_modifyitems(config, items):
    spec = os.environ.get("TLX_GPU_SHARD")
    if not spec:
        return
    shard = parse_shard(spec)
    kept, dropped = [], []
    for index, item in enumerate(items):
        (kept if in_shard(index, shard) else dropped).append(item)
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept
