"""The SASS check for wgmma descriptors that ptxas sets on some paths only (tlx/gluon/sass.py)."""
from tlx.gluon import sass

# Shape of the H200 miscompile: the Q+32B descriptor UR12:UR13 is set only inside the branch that a
# zero-trip loop skips; the HGMMA after the join reads it anyway.
SET_ON_ONE_PATH = """
        /*0000*/                   S2UR UR24, SR_CgaCtaId ;
        /*0010*/                   UMOV UR25, 0x400 ;
        /*0020*/                   UMOV UR26, 0x800 ;
        /*0030*/                   UMOV UR27, 0xc00 ;
        /*0040*/              @!P0 BRA `(.L_x_5) ;
        /*0050*/                   UIADD3 UR12, UP0, UR24, 0x2, URZ ;
        /*0060*/                   UIADD3.X UR13, URZ, UR25, URZ, UP0, !UPT ;
.L_x_5:
        /*0070*/                   UMOV UR14, UR26 ;
        /*0080*/                   UMOV UR15, UR27 ;
        /*0090*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR24], RZ ;
        /*00a0*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR12], R24 ;
        /*00b0*/                   EXIT ;
"""


def test_flags_a_descriptor_set_on_one_path_only():
    found = sass.unset_wgmma_descriptors(SET_ON_ONE_PATH)
    assert len(found) == 1 and "/*00a0*/" in found[0] and "UR12 UR13" in found[0] and "UR14" not in found[0]


def test_a_descriptor_set_before_the_branch_is_clean():
    fixed = SET_ON_ONE_PATH.replace("        /*0040*/              @!P0 BRA `(.L_x_5) ;\n", "").replace(
        ".L_x_5:\n", "        /*0065*/              @!P0 BRA `(.L_x_5) ;\n.L_x_5:\n")
    assert sass.unset_wgmma_descriptors(fixed) == []


def test_predicated_writes_do_not_count_and_registers_a_operand_reads_b_only():
    text = """
        /*0000*/                   UMOV UR6, 0x1 ;
        /*0010*/               @P1 UMOV UR7, 0x2 ;
        /*0020*/                   HGMMA.64x64x16.F32.BF16 R0, R8, gdesc[UR4], R0 ;
        /*0030*/                   EXIT ;
"""
    found = sass.unset_wgmma_descriptors(text)                 # A in registers: B descriptor UR6:UR7
    assert len(found) == 1 and "UR7 not set" in found[0]


def test_library_kernel_binary_is_clean():
    """A real attention binary, disassembled by the wheel's nvdisasm: parsed, and nothing flagged."""
    import torch
    import tlx
    from tlx.kernels import attention
    q, k, v = (torch.randn(1, 2, 256, 64, dtype=torch.bfloat16) for _ in range(3))
    o, lse = torch.empty_like(q), torch.empty(1, 2, 256)
    args, _, meta, cfg = attention.launch_args(q, k, v, o, lse, 0.125, "bhsd", attention.Config(PERSISTENT=True),
                                              attention.Features(causal=True))
    report = tlx.compile(attention.attention_fwd_kernel, *args, num_warps=4, **meta)
    instrs, _ = sass.parse(sass.disassemble(report.asm["cubin"]))
    assert sum(i.op.startswith("HGMMA") for i in instrs) > 0
    assert report.stats["wgmma_desc_unset"] == 0


def test_indirect_branch_reaches_every_label():
    """BRX may land on any label: a descriptor set after one label only is not set on every path."""
    text = """
        /*0000*/                   UMOV UR4, 0x1 ;
        /*0010*/                   UMOV UR5, 0x2 ;
        /*0020*/                   BRX R2 -0x30 ;
.L_x_1:
        /*0030*/                   UMOV UR6, 0x3 ;
        /*0040*/                   UMOV UR7, 0x4 ;
.L_x_2:
        /*0050*/                   HGMMA.64x64x16.F32.BF16 R0, gdesc[UR4], R0 ;
        /*0060*/                   EXIT ;
"""
    found = sass.unset_wgmma_descriptors(text)
    assert len(found) == 1 and "UR6 UR7" in found[0]


def test_indirect_branch_with_listed_targets_reaches_those_only():
    """nvdisasm names a BRX's targets (the dispatch to three or more warp-specialized partitions): a
    descriptor set on every listed path is set; with a target it cannot find, every label counts (.L_x_4
    too, reached with nothing set)."""
    text = """
        /*0000*/                   BRX R2 -0x10        (*"BRANCH_TARGETS .L_x_1,.L_x_3"*);
.L_x_1:
        /*0010*/                   UMOV UR4, 0x1 ;
        /*0020*/                   UMOV UR5, 0x2 ;
        /*0030*/                   BRA `(.L_x_4) ;
.L_x_3:
        /*0050*/                   UMOV UR4, 0x1 ;
        /*0060*/                   UMOV UR5, 0x2 ;
.L_x_4:
        /*0070*/                   HGMMA.64x64x16.F32.BF16 R0, R8, gdesc[UR2], R0 ;
        /*0080*/                   EXIT ;
"""
    assert sass.unset_wgmma_descriptors(text) == []
    unknown = text.replace("BRANCH_TARGETS .L_x_1,.L_x_3", "BRANCH_TARGETS .L_x_1,.L_x_9")
    assert len(sass.unset_wgmma_descriptors(unknown)) == 1
