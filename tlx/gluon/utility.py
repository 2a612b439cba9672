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


def _cluster(name):
    @gluon_rule(name)
    def rule(ctx, *args, **kwargs):
        raise TlxUnsupported(name, "gluon", "Gluon 3.6 has no cluster builtins (CTA clusters, DSMEM, multicast); "
                             "the simulator runs them (backend='sim', ctas_per_cga=...)")
    return rule


for _name in ("cluster_cta_rank", "cluster_size_1d", "cluster_barrier", "remote_view"):
    _cluster(_name)
