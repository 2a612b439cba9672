"""What tlx changes in Gluon's frontend for generated functions: layout reconciliation.

Gluon never inserts a layout conversion and requires loop-carried values to keep one type. tlx
kernels are written without layouts, so (1) a binary op between two different concrete layouts
converts the non-MMA side, and (2) a loop whose body turns an Auto-layout value into a concrete
one (e.g. `acc = tl.zeros(...)` then `acc = tlx.async_dot(..., acc)`) starts from the concrete
layout, so the loop carries the MMA accumulator without per-iteration conversions."""
from __future__ import annotations

from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma_accumulator, warpgroup_mma_init

from . import descriptor_methods, layouts
from ._triton_compat import CodeGenerator, GluonSemantic, _is_triton_tensor, gl_core, gluon_tensor_descriptor

MAX_CARRY_ROUNDS = 3


def _concrete(t) -> bool:
    ty = getattr(t, "type", None)
    return isinstance(ty, gl.distributed_type) and not isinstance(ty.layout, (gl.AutoLayout, gl.CoalescedLayout))


# Layout policies, tried in this order until Gluon resolves every Auto layout (tlx.gluon.launch):
LAYOUT_POLICIES = (
    "default",              # 1-D stores left for other anchors (row statistics take their tile's layout)
    "anchor_1d_stores",     # ... anchored with the 1-D default layout
    "split_index_vectors",  # ... and an Auto 1-D vector gets its own layout, converted at each expand_dims, so
                            # one `offs_k` may index tiles of two layouts (Triton's matmul tutorial does)
)


class TlxSemantic(GluonSemantic):

    def __init__(self, builder, jit_fn=None):
        super().__init__(builder)
        policy = getattr(jit_fn, "_tlx_layout_policy", 0)   # this compile attempt's index in LAYOUT_POLICIES
        self.anchor_1d_stores = policy >= 1
        self.split_index_vectors = policy >= 2

    def warps(self) -> int:
        """The warps of the function being built (a task's own count inside a warp-specialized region)."""
        return gl_core._unwrap_if_constexpr(self.num_warps(self.generator))

    def expand_dims(self, input, axis):
        if self.split_index_vectors and len(input.shape) == 1 and isinstance(input.type.layout, gl.AutoLayout):
            shape = [int(input.shape[0])]
            shape.insert(axis, 1)
            parent = layouts.blocked_for(shape, self.warps())
            input = self.set_auto_layout(input, layouts.blocked_for(input.shape, self.warps()))
            input = self.convert_layout(input, gl.SliceLayout(axis, parent))
        return super().expand_dims(input, axis)

    def broadcast_impl_value(self, lhs, rhs):
        if _concrete(lhs) and _concrete(rhs) and lhs.type.layout != rhs.type.layout:
            if self.split_index_vectors and lhs.type.shape != rhs.type.shape and \
                    len(lhs.type.shape) == len(rhs.type.shape) and \
                    not layouts.is_mma(lhs.type.layout) and not layouts.is_mma(rhs.type.layout):
                # two split index vectors meet (offs_m[:, None] + offs_k[None, :]): the tile's default layout
                shape = [max(int(a), int(b)) for a, b in zip(lhs.type.shape, rhs.type.shape)]
                tile = layouts.blocked_for(shape, self.warps())
                lhs, rhs = self.convert_layout(lhs, tile), self.convert_layout(rhs, tile)
            elif layouts.is_mma(rhs.type.layout) and not layouts.is_mma(lhs.type.layout):
                lhs = self.convert_layout(lhs, rhs.type.layout)
            elif lhs.type.shape == rhs.type.shape or len(rhs.type.shape) == len(lhs.type.shape):
                rhs = self.convert_layout(rhs, lhs.type.layout)
        return super().broadcast_impl_value(lhs, rhs)

    def reshape(self, input, dst_shape, can_reorder):
        # Gluon 3.6 crashes resolving an Auto layout backwards through a flattening reshape (tl.sum
        # over all axes reshapes first): anchor the input with its shape's default layout.
        if isinstance(getattr(input.type, "layout", None), gl.AutoLayout):
            input = self.set_auto_layout(input, layouts.blocked_for(input.shape, self.warps()))
        return super().reshape(input, dst_shape, can_reorder)

    def to_layout(self, value, layout):
        """`value` in `layout`: anchor an Auto value, convert a concrete one, keep a matching one."""
        ty = value.type
        if isinstance(ty.layout, gl.AutoLayout):
            return self.set_auto_layout(value, layout)
        if ty.layout != layout:
            return self.convert_layout(value, layout)
        return value


class TlxCodeGenerator(CodeGenerator):

    def get_Attribute(self, lhs, attr):
        # Triton's descriptor methods (desc.load / desc.store): Gluon's descriptor has none
        if isinstance(lhs, gluon_tensor_descriptor) and not hasattr(lhs, attr):
            return descriptor_methods.bound_method(lhs, attr)
        return super().get_Attribute(lhs, attr)

    def _find_carries(self, node, liveins, ignore=set()):
        """Like Triton's, but first give loop inputs the type the body produces: an Auto-layout input
        takes the body's concrete layout, and a tensor input becomes an in-flight wgmma accumulator
        when the body leaves one in flight (an async_dot not yet covered by a wait)."""
        ip, last_loc = self._get_insertion_point_and_loc()
        for _ in range(MAX_CARRY_ROUNDS):
            block = self.builder.create_block()
            self.builder.set_insertion_point_to_start(block)
            self.scf_stack.append(node)
            self.visit_compound_statement(node.body)
            self.scf_stack.pop()
            block.erase()
            changed = {name: self.lscope[name] for name, live in liveins.items()
                       if name not in ignore and _is_triton_tensor(live) and name in self.lscope
                       and _carry_fix(live, self.lscope[name]) is not None}
            self.lscope = liveins.copy()
            self.local_defs = {}
            self._set_insertion_point_and_loc(ip, last_loc)
            if not changed:
                break
            for name, new in changed.items():
                liveins[name] = _carry_fix(liveins[name], new)(self.semantic)
            self.lscope = liveins.copy()
        return super()._find_carries(node, liveins, ignore)


def _carry_fix(live, new):
    """How to turn loop input `live` into the type of the body's `new`, or None if nothing to do."""
    if isinstance(new, warpgroup_mma_accumulator) and live.type.shape == new.type.tensor_type.shape:
        layout = new.type.tensor_type.layout
        return lambda sem: warpgroup_mma_init(sem.to_layout(live, layout), _semantic=sem)
    if _is_triton_tensor(new) and live.type != new.type and _concrete(new) and \
            isinstance(getattr(live.type, "layout", None), gl.AutoLayout) and live.type.shape == new.type.shape:
        return lambda sem: sem.set_auto_layout(live, new.type.layout)
    return None
