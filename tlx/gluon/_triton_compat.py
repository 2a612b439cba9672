"""Every private Triton API tlx uses, imported in one place so a Triton bump touches one file."""
from triton.compiler import code_generator as _code_generator
from triton.compiler.code_generator import CodeGenerator, _is_triton_tensor  # noqa: F401
from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction  # noqa: F401
from triton.experimental.gluon.language import _core as gl_core
from triton.experimental.gluon.language._core import builtin, shared_memory_descriptor, shared_memory_descriptor_type  # noqa: F401
from triton.experimental.gluon.language._semantic import GluonSemantic
from triton.experimental.gluon.language.nvidia.hopper.tma import tensor_descriptor as gluon_tensor_descriptor  # noqa: F401
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonHostTensorDescriptor  # noqa: F401
from triton.runtime.jit import JITFunction  # noqa: F401

__all__ = ["CodeGenerator", "GluonASTSource", "GluonJITFunction", "GluonSemantic", "builtin", "gl_core",
           "install_codegen_hook"]

_HOOKED = False


def install_codegen_hook(make_semantic, codegen_class) -> None:
    """Let tlx-generated functions (JITFunctions flagged `_tlx_generated`) use tlx's semantic and
    code generator; every other kernel compiles exactly as before."""
    global _HOOKED
    if _HOOKED:
        return
    original_init = CodeGenerator.__init__

    def __init__(self, context, prototype, gscope, function_name, jit_fn, **kwargs):
        original_init(self, context, prototype, gscope, function_name, jit_fn, **kwargs)
        if getattr(jit_fn, "_tlx_generated", False) and self.is_gluon:
            self.semantic = make_semantic(self.builder, jit_fn)
            self.semantic.generator = self
            self.__class__ = codegen_class

    CodeGenerator.__init__ = __init__
    _code_generator.CodeGenerator = CodeGenerator
    _HOOKED = True
