import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("GPU tests need CUDA (run them on the H200)", allow_module_level=True)
