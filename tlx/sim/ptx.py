"""Inline PTX the simulator can run: the one-instruction elementwise fast-math forms kernels use
through `tl.inline_asm_elementwise` (e.g. `tanh.approx.f32 $0, $1;` for attention's softcap).
Anything else is refused by name: the simulator never guesses what an asm block computes."""
from __future__ import annotations

import re

import numpy as np

from ..errors import TlxUnsupported

# instruction -> numpy function of the operand ($1, ...), computed in float32 like the hardware unit
INSTRUCTIONS = {
    "tanh.approx.f32": np.tanh,
    "ex2.approx.f32": np.exp2, "ex2.approx.ftz.f32": np.exp2,
    "lg2.approx.f32": np.log2, "lg2.approx.ftz.f32": np.log2,
    "rcp.approx.f32": np.reciprocal, "rcp.approx.ftz.f32": np.reciprocal,
    "sqrt.approx.f32": np.sqrt, "sqrt.approx.ftz.f32": np.sqrt,
    "rsqrt.approx.f32": lambda x: 1.0 / np.sqrt(x), "rsqrt.approx.ftz.f32": lambda x: 1.0 / np.sqrt(x),
    "sin.approx.f32": np.sin, "sin.approx.ftz.f32": np.sin,
    "cos.approx.f32": np.cos, "cos.approx.ftz.f32": np.cos,
}
_ONE_INSTRUCTION = re.compile(r"^\s*([a-z0-9.]+)\s+\$0\s*,\s*\$1\s*;?\s*$")


def elementwise(asm: str, constraints: str, operands: list[np.ndarray], n_results: int, pack: int) -> np.ndarray:
    """The result of one known instruction `op $0, $1;` applied to the operand, as float32."""
    match = _ONE_INSTRUCTION.match(asm)
    op = match.group(1) if match else None
    if op not in INSTRUCTIONS or len(operands) != 1 or n_results != 1 or pack != 1 or \
            constraints.replace(" ", "") not in ("=r,r", "=f,f"):
        raise TlxUnsupported("tl.inline_asm_elementwise", "sim",
                             f"the simulator runs only `op $0, $1;` with one f32 operand, one result and pack=1 for op "
                             f"in {sorted(INSTRUCTIONS)}; got {asm!r} with constraints {constraints!r}, "
                             f"{len(operands)} operand(s), {n_results} result(s), pack={pack}")
    with np.errstate(all="ignore"):                  # inf/nan propagate as on the GPU
        return INSTRUCTIONS[op](operands[0].astype(np.float32)).astype(np.float32)
