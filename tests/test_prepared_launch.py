"""PreparedLaunch hands the compiled launcher exactly what Triton's own descriptor-expanding wrapper
would (checked against Triton's real `wrap_handle_tensordesc`), without a GPU: the driver, stream and
compiled kernel are stand-ins that record the call."""
from types import SimpleNamespace

import pytest
import torch
from triton import knobs
from triton.backends.nvidia.driver import wrap_handle_tensordesc

from tlx.gluon import prepared

SIGNATURE = {"a_desc": "tensordesc<fp16[64, 64]>", "x_ptr": "*fp16", "n": "i32", "BLOCK": "constexpr"}


def _normalized(args):
    return [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(_normalized(args))


class FakeLauncher:
    """Triton 3.6's CudaLauncher as PreparedLaunch sees it; calling it is the scratch-allocating route."""

    def __init__(self, recorder, scratch):
        self.launch = wrap_handle_tensordesc(recorder, SIGNATURE, None)
        self.launch_cooperative_grid = self.launch_pdl = False
        self.global_scratch_size, self.profile_scratch_size = scratch, 0
        self.direct = Recorder()

    def __call__(self, *args):
        self.direct(*args)


def _compiled(recorder, scratch=0):
    return SimpleNamespace(run=FakeLauncher(recorder, scratch), function=1234, packed_metadata=("packed",),
                           src=SimpleNamespace(signature=SIGNATURE),
                           launch_metadata=lambda grid, stream: {"grid": grid, "stream": stream})


@pytest.fixture
def fake_driver(monkeypatch):
    occupancy = lambda function, shared, cluster: (function, shared, cluster)     # noqa: E731  (echoes its query)
    active = SimpleNamespace(get_current_device=lambda: 0, get_current_stream=lambda device: 77,
                             utils=SimpleNamespace(cuOccupancyMaxActiveClusters=occupancy))
    monkeypatch.setattr(prepared, "driver", SimpleNamespace(active=active))


def _args():
    base = torch.randn(128, 64, dtype=torch.float16)
    desc = SimpleNamespace(base=base, shape=[128, 64], strides=[64, 1], padding="zero")
    return [desc, torch.randn(8, dtype=torch.float16), 128, 64]


def test_matches_tritons_descriptor_expansion(fake_driver):
    rec = Recorder()
    compiled = _compiled(rec)
    args = _args()
    launch = prepared.PreparedLaunch(compiled, (3, 2), args)
    assert launch.fast
    launch()
    launch()
    compiled.run.launch(3, 2, 1, 77, 1234, False, False, None, None, ("packed",), None, None, None, *args)
    assert rec.calls[0] == rec.calls[1] == rec.calls[2]
    assert rec.calls[0][:5] == [3, 2, 1, 77, 1234]


def test_no_tensor_is_kept(fake_driver):
    args = _args()
    launch = prepared.PreparedLaunch(_compiled(Recorder()), (1,), args)
    assert not any(isinstance(a, torch.Tensor) for a in launch._args)


def test_enter_hook_gets_launch_metadata(fake_driver, monkeypatch):
    rec, seen = Recorder(), []
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", knobs.HookChain())
    knobs.runtime.launch_enter_hook.add(seen.append)
    launch = prepared.PreparedLaunch(_compiled(rec), (5,), _args())
    launch()
    meta_index = 10
    assert rec.calls[0][meta_index] == {"grid": (5, 1, 1), "stream": 77}
    assert rec.calls[0][meta_index + 1] is knobs.runtime.launch_enter_hook
    assert rec.calls[0][meta_index + 2] is None     # no exit hook installed: none passed


def test_scratch_kernels_take_the_launcher_route(fake_driver):
    rec = Recorder()
    compiled = _compiled(rec, scratch=256)
    args = _args()
    launch = prepared.PreparedLaunch(compiled, (4,), args)
    assert not launch.fast
    launch()
    assert compiled.run.direct.calls == [_normalized([4, 1, 1, 77, 1234, ("packed",), None, None, None, *args])]


def test_empty_hook_chains_are_not_passed():
    assert prepared._installed(knobs.HookChain()) is None
    chain = knobs.HookChain()
    chain.add(print)
    assert prepared._installed(chain) is chain


def test_cluster_launch_packs_the_cluster_size_and_divides_the_grid(fake_driver):
    """ctas_per_cga=(2, 1, 1): Triton's launcher multiplies grid x by the packed num_ctas and starts the
    CTAs in clusters of that size, so the prepared launch hands it half the grid and num_ctas=2."""
    rec = Recorder()
    compiled = _compiled(rec)
    compiled.packed_metadata = (4, 1, 213312)
    launch = prepared.PreparedLaunch(compiled, (132,), _args(), cluster=2)
    launch()
    assert rec.calls[0][:3] == [66, 1, 1] and (4, 2, 213312) in rec.calls[0]
    assert launch.max_active_clusters == (1234, 213312, 2)      # asked of this function, its shared memory, pairs
    assert prepared.PreparedLaunch(_compiled(Recorder()), (4,), _args()).max_active_clusters is None
    with pytest.raises(Exception, match=r"grid \(3, 1, 1\) must be a multiple of the cluster \(2, 1, 1\)"):
        prepared.PreparedLaunch(_compiled(Recorder()), (3,), _args(), cluster=2)
