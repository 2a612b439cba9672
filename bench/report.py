"""Markdown tables for BENCHMARKS.md from the JSON that bench/gemm.py and bench/attention.py write.

    python3 bench/report.py gemm bench/results/2026-12-02/gemm-run4.json
"""
import json
import sys


def gemm_table(data) -> str:
    m = data["meta"]
    retimed = any("confirm_best_ratio" in r for r in data["rows"])   # bench/gemm.py re-times since 2026-12-03 run 5
    extra = " re-timed default ratio | re-timed best ratio |" if retimed else ""
    out = [f"{m['gpu']}, torch {m['torch']}, triton {m['triton']}, {m['date']}.", "",
           "| dtype | M x N x K | cuBLAS TFLOPS | tlx default TFLOPS | default ratio | default graph ratio | "
           "best ratio | best tlx kernel |" + extra,
           "|---|---|---|---|---|---|---|---|" + ("---|---|" if retimed else "")]
    for r in data["rows"]:
        cells = f" {r.get('confirm_default_ratio', 0):.2f} | {r.get('confirm_best_ratio', 0):.2f} |" if retimed else ""
        out.append(f"| {r['dtype']} | {'x'.join(map(str, r['shape']))} | {r['cublas_tflops']:.0f} | "
                   f"{r.get('default', {}).get('tflops', 0):.0f} | {r.get('default_ratio', 0):.2f} | "
                   f"{r.get('default_graph_ratio', 0):.2f} | {r.get('ratio', 0):.2f} | {r.get('best', '-')} |" + cells)
    out += ["", "Geometric means: " + ", ".join(f"{k.replace('geomean_', '')} {v:.3f}" for k, v in m.items()
                                                if k.startswith("geomean"))]
    return "\n".join(out)


def attention_table(data) -> str:
    m = data["meta"]
    plain = [r for r in data["rows"] if "feature" not in r]
    variants = [k[:-len("_tflops")] for k in plain[0] if k.startswith("tlx") and k.endswith("_tflops")] if plain else []
    out = [f"{m['gpu']}, torch {m['torch']}, triton {m['triton']}, {m['date']}, {m['dtype']}, B*S = 16384, "
           "H*D = 2048; TFLOPS. 'tlx': the op's default configuration; the other tlx columns: fixed variants "
           "(bench/attention.py VARIANTS).", "",
           "| D | S | causal | " + " | ".join(variants) + " | cuDNN | FA2 (SDPA flash) | ratio to cuDNN |",
           "|---|---|---|" + "---|" * (len(variants) + 3)]

    def cell(r, key):
        return f"{r[key]:.0f}" if key in r else "-"
    for r in plain:
        out.append(f"| {r['D']} | {r['S']} | {'yes' if r['causal'] else 'no'} | "
                   + " | ".join(cell(r, f"{v}_tflops") for v in variants)
                   + f" | {cell(r, 'cudnn_tflops')} | {cell(r, 'flash_tflops')} | {r.get('ratio_cudnn', 0):.2f} |")
    out += ["", f"Geometric mean of the ratio to cuDNN: {m.get('geomean_ratio_cudnn', float('nan')):.3f}"]
    features = [r for r in data["rows"] if "feature" in r]
    if not features:
        return "\n".join(out)
    out += ["",
            "Features (TFLOPS over the attended pairs; 'base': the feature without PIPELINE; 'plain': the same "
            "shape without the feature):", "",
            "| feature | D | S | H / H_kv | tlx | base | plain | cuDNN | FA2 | rel. error |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for r in features:
        err = f"{r['tlx_rel_err']:.1e}" if "tlx_rel_err" in r else "-"
        out.append(f"| {r['feature']} | {r['D']} | {r['S']} | {r['H']} / {r['H_kv']} | {cell(r, 'tlx_tflops')} | "
                   f"{cell(r, 'tlx_base_tflops')} | {cell(r, 'tlx_plain_tflops')} | {cell(r, 'cudnn_tflops')} | "
                   f"{cell(r, 'flash_tflops')} | {err} |")
    return "\n".join(out)


if __name__ == "__main__":
    kind, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        data = json.load(f)
    print(gemm_table(data) if kind == "gemm" else attention_table(data))
