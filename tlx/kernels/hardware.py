"""What the library kernels size their grids and buffers by."""
from __future__ import annotations

from tlx.gluon.report import SHARED_LIMIT as _BLOCK_SHARED

SHARED_LIMIT = _BLOCK_SHARED["sm_90a"] - 1024   # the H200's opt-in shared memory per block, less room for barriers


def num_sms(device) -> int:
    """Streaming multiprocessors of `device`; 132 (the H200) for a CPU tensor, as compile reports and
    the simulator assume."""
    import torch
    if getattr(device, "type", "cpu") == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132
