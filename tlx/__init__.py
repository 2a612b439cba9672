"""tlx: TLX (Triton Low-Level Extensions) on stock Triton 3.6, lowered through Gluon.

Kernels written for Meta's TLX port by changing two lines:
`import triton.language.extra.tlx as tlx` -> `import tlx` and `@triton.jit` -> `@tlx.jit`."""
from .errors import ConfigRejected, TlxCompileError, TlxError, TlxLaunchError, TlxUnsupported
from .frontend.descriptors import TensorDescriptor
from .frontend.kernel import TlxKernel, jit
from .language import storage_kind, warp_spec
from .language.barriers import (alloc_barriers, barrier_arrive, barrier_expect_bytes, barrier_wait, fence,
                                fence_async_shared, named_barrier_arrive, named_barrier_wait)
from .language.cluster import cluster_barrier, cluster_cta_rank, cluster_size_1d, remote_view
from .language.memory import (local_alloc, local_load, local_reshape, local_slice, local_store, local_trans,
                              local_view)
from .language.mma import async_dot, async_dot_wait
from .language.tasks import async_task, async_task_replica_id, async_tasks
from .language.tma import (async_descriptor_load, async_descriptor_store, async_descriptor_store_wait, async_load,
                           async_load_commit_group, async_load_wait_group)
from .language.utility import clock64, dtype_of, dump_layout, globaltimer, require_layout, size_of, thread_id
from .version import __version__


def compile(kernel, *args, target: str = "sm_90a", num_warps: int = 4, **kwargs):
    """Compile without a GPU and return a report with `.asm` ("ttgir", "ptx", ...) and `.stats`."""
    from .gluon.report import compile as _compile
    return _compile(kernel, *args, target=target, num_warps=num_warps, **kwargs)


__all__ = [
    "ConfigRejected", "TensorDescriptor", "TlxCompileError", "TlxError", "TlxKernel", "TlxLaunchError",
    "TlxUnsupported", "__version__", "alloc_barriers", "async_descriptor_load", "async_descriptor_store",
    "async_descriptor_store_wait", "async_dot", "async_dot_wait", "async_load", "async_load_commit_group",
    "async_load_wait_group", "async_task", "async_task_replica_id", "async_tasks", "barrier_arrive",
    "barrier_expect_bytes", "barrier_wait", "clock64", "cluster_barrier", "cluster_cta_rank", "cluster_size_1d",
    "compile", "dtype_of", "dump_layout", "fence", "fence_async_shared", "globaltimer", "jit", "local_alloc",
    "local_load", "local_reshape", "local_slice", "local_store", "local_trans", "local_view", "named_barrier_arrive",
    "named_barrier_wait", "remote_view", "require_layout", "size_of", "storage_kind", "thread_id", "warp_spec",
]
