"""Lowering of utilities (thread ids, clocks, dtype facts, layout introspection) and cluster ops."""
from __future__ import annotations

from triton.experimental.gluon import language as gl

from ..errors import TlxUnsupported
from .barriers import inline_ptx
from .rules import gluon_rule


@gluon_rule("thread_id")
def _thread_id(ctx, axis):
    return inline_ptx(ctx, f"mov.u32 $0, %tid.{'xyz'[axis]};")


@gluon_rule("clock64")
def _clock64(ctx):
    return inline_ptx(ctx, "mov.u64 $0, %clock64;", dtype=gl.int64, constraint="=l")


@gluon_rule("globaltimer")
def _globaltimer(ctx):
    return inline_ptx(ctx, "mov.u64 $0, %globaltimer;", dtype=gl.int64, constraint="=l")


@gluon_rule("dtype_of")
def _dtype_of(ctx, x):
    if hasattr(x, "block_type"):
        return gl.constexpr(x.block_type.element_ty)
    dtype = x.dtype
    return gl.constexpr(dtype.element_ty if isinstance(dtype, gl.pointer_type) else dtype)


@gluon_rule("size_of")
def _size_of(ctx, dtype):
    return gl.constexpr(dtype.primitive_bitwidth // 8)


@gluon_rule("dump_layout")
def _dump_layout(ctx, x):
    ty = getattr(x, "type", None)
    layout = getattr(getattr(ty, "tensor_type", ty), "layout", None)
    print(f"tlx.dump_layout: {getattr(ty, 'tensor_type', ty)} -> {layout!r}")


@gluon_rule("require_layout")
def _require_layout(ctx, x, layout):
    return ctx.semantic.to_layout(x, layout)


# Cluster ops as inline PTX (Gluon 3.6 has no builtins). The cluster barrier also publishes the CTA's mbarrier
# initialization to the cluster; call it where every warp runs it (the start and end of every task).
@gluon_rule("cluster_cta_rank")
def _cluster_cta_rank(ctx):
    return inline_ptx(ctx, "mov.u32 $0, %cluster_ctarank;")


@gluon_rule("cluster_size_1d")
def _cluster_size_1d(ctx):
    return inline_ptx(ctx, "mov.u32 $0, %cluster_nctarank;")


@gluon_rule("cluster_barrier")
def _cluster_barrier(ctx):
    inline_ptx(ctx, "fence.mbarrier_init.release.cluster;\n\tbarrier.cluster.arrive.release.aligned;\n\t"
                    "barrier.cluster.wait.acquire.aligned;\n\tmov.u32 $0, 0;")


@gluon_rule("remote_view")
def _remote_view(ctx, bar, rank):
    raise TlxUnsupported("remote_view", "gluon", "a kernel cannot name another CTA's mbarrier in Gluon 3.6; use "
                         "barrier_arrive(bar, remote_cta_rank=rank), which the PTX pass lowers")
