"""What the persistent kernels size their grids by."""
from __future__ import annotations


def num_sms(device) -> int:
    """Streaming multiprocessors of `device`; 132 (the H200) for a CPU tensor, as compile reports and
    the simulator assume."""
    import torch
    if getattr(device, "type", "cpu") == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132
