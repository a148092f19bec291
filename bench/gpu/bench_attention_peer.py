#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The peer for bench/bench_gpu_attention.c: PyTorch's
torch.nn.functional.scaled_dot_product_attention on the same shapes, in bf16
(f16 on a GPU without bf16), non-causal, no mask, layout (B, H, T, hd), timed
forward (with grad enabled, so the log-sum-exp is kept as in training),
backward alone (torch.autograd.grad on a retained graph) and forward +
backward, once per SDPA backend (flash, efficient, cudnn; a backend that
raises is skipped with its reason). Timing: warm-up, then the median over
--repeats of CUDA-event-timed batches of calls. FLOPs as in our benchmark:
forward 4*B*H*T^2*hd, backward 2.5x that. Our kernel also applies RoPE and
reads a packed qkv; SDPA gets separate q, k, v without RoPE.

Prints one line per shape and backend in bench_gpu_attention's format,
FlashAttention-2's published TFLOP/s (not measured here) next to the shapes
they match, and with --ours LOG (bench_gpu_attention's output) one line per
shape:
  ATTN_RATIO shape=... esmtrain=<fwd+bwd TF/s> sdpa=<best fwd+bwd TF/s> (backend) ratio=...

Usage: bench_attention_peer.py [--quick] [--repeats N] [--ours LOG]
                               [--device cuda|cpu] [--backends flash,efficient,cudnn]
--device cpu is a smoke mode (tiny shapes, fp32, wall-clock timing).
Exit 77 with a SKIP: line without PyTorch or a CUDA device (unless --device cpu)."""
import argparse
import os
import re
import statistics
import sys
import time
import warnings

# bench/record.py: one results line per figure
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from record import record  # noqa: E402

# Shapes of bench/bench_gpu_attention.c (main(): "reference", then for
# T in 512, 1024 with B = 16 at T = 512 and 8 at T = 1024 the ESM-2 shapes).
# Keep in sync with that file. (label, B, T, H, hd)
GPU_SHAPES = [("reference", 16, 512, 16, 64)]
for _T in (512, 1024):
    _B = 16 if _T == 512 else 8
    GPU_SHAPES += [("esm2-8M", _B, _T, 20, 16), ("esm2-650M", _B, _T, 20, 64),
                   ("esm2-3B", _B, _T, 40, 64)]
CPU_SHAPES = [("cpu-tiny", 2, 64, 4, 16), ("cpu-small", 2, 128, 4, 32)]

# FlashAttention-2 as published (bf16/fp16, no causal mask), TFLOP/s with the
# same FLOP convention as ours. Not measured here. Their shapes: hidden 2048
# (32 heads at hd 64, 16 at hd 128), batch 16k / seqlen; values read off the
# bar labels of the charts in the FlashAttention repository's README.
FA2_SOURCES = {
    "A": "Dao, FlashAttention-2, arXiv:2307.08691: A100 fwd+bwd chart = "
         "github.com/Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png "
         "(README 'Performance', FA2 release 2023-07-17), panels (a) hd 64, (b) hd 128, no causal mask",
    "H": "same paper, H100 fwd+bwd chart = "
         "github.com/Dao-AILab/flash-attention assets/flash2_h100_fwd_bwd_benchmark.png, "
         "panels (a) hd 64, (b) hd 128, no causal mask",
    "F": "Shah et al., FlashAttention-3, arXiv:2407.08608: H100 forward chart, FA2 bars = "
         "github.com/Dao-AILab/flash-attention assets/flash3_fp16_fwd.png, "
         "panels (a) hd 64, (c) hd 128, no causal mask",
}
OCCLUDED = "label partly behind the chart legend"
# (gpu, pass, hd, T): (TFLOP/s or None = not legible, source id, note)
FA2_PUBLISHED = {
    ("A100 80GB SXM4", "fwd+bwd", 64, 512): (132, "A", ""),
    ("A100 80GB SXM4", "fwd+bwd", 64, 1024): (153, "A", OCCLUDED),
    ("A100 80GB SXM4", "fwd+bwd", 128, 512): (None, "A", "label hidden by the chart legend"),
    ("A100 80GB SXM4", "fwd+bwd", 128, 1024): (173, "A", OCCLUDED),
    ("H100 80GB SXM5", "fwd+bwd", 64, 512): (215, "H", ""),
    ("H100 80GB SXM5", "fwd+bwd", 64, 1024): (254, "H", ""),
    ("H100 80GB SXM5", "fwd+bwd", 128, 512): (248, "H", ""),
    ("H100 80GB SXM5", "fwd+bwd", 128, 1024): (294, "H", OCCLUDED),
    ("H100 80GB SXM5", "fwd", 64, 512): (282, "F", ""),
    ("H100 80GB SXM5", "fwd", 64, 1024): (306, "F", ""),
    ("H100 80GB SXM5", "fwd", 128, 512): (309, "F", ""),
    ("H100 80GB SXM5", "fwd", 128, 1024): (350, "F", ""),
}

BACKENDS = ("flash", "efficient", "cudnn", "math")
OURS_RE = re.compile(
    r"^(\S+)\s+B=(\d+)\s+T=(\d+)\s+H=(\d+)\s+hd=(\d+)\s+fwd\s+([\d.]+) ms\s+([\d.]+) TF/s \|"
    r"\s*bwd\s+([\d.]+) ms\s+([\d.]+) TF/s \|\s*fwd\+bwd\s+([\d.]+) ms\s+([\d.]+) TF/s")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats (median)")
    ap.add_argument("--ours", metavar="LOG", help="bench_gpu_attention output to compare with")
    ap.add_argument("--backends", default=None,
                    help="comma list of " + ",".join(BACKENDS) +
                         " (default: flash,efficient,cudnn; cpu adds math)")
    a = ap.parse_args(argv)
    if a.repeats is None:
        a.repeats = 3 if a.quick else 15
    default = "flash,efficient,cudnn" + (",math" if a.device == "cpu" else "")
    a.backends = [b.strip() for b in (a.backends or default).split(",") if b.strip()]
    bad = [b for b in a.backends if b not in BACKENDS]
    if bad:
        ap.error("unknown backend(s): " + ",".join(bad))
    return a


def shape_key(label, B, T, H, hd):
    return f"{label}/B{B}/T{T}/H{H}/hd{hd}"


def read_ours(path):
    """bench_gpu_attention lines by (B, T, H, hd): [(label, fwd+bwd TF/s), ...] in order
    (the default, deterministic backward first; "-nondet" labels the atomic-dQ one)."""
    ours = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = OURS_RE.match(line.strip())
            if m:
                B, T, H, hd = (int(m.group(i)) for i in range(2, 6))
                ours.setdefault((B, T, H, hd), []).append((m.group(1), float(m.group(11))))
    return ours


def backend_enum(name):
    from torch.nn.attention import SDPBackend
    return {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[name]


def make_timer(torch, device):
    """Returns timed(fn, inner) -> seconds per call of fn, over inner calls."""
    if device == "cuda":
        def timed(fn, inner):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3 / inner
    else:
        def timed(fn, inner):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            return (time.perf_counter() - t0) / inner
    return timed


def median_time(timed, fn, inner, repeats):
    return statistics.median(timed(fn, inner) for _ in range(repeats))


def first_line(text):
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0] if lines else "(no message)"


def bench_backend(torch, timed, backend, q, k, v, dout, fl, repeats):
    """(fwd s, bwd s, fwd+bwd s) per call for one backend; raises if it cannot run."""
    from torch.nn.attention import sdpa_kernel
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with sdpa_kernel([backend_enum(backend)]):
        def fwd():
            return sdpa(q, k, v)

        def both():
            torch.autograd.grad(sdpa(q, k, v), (q, k, v), dout)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = fwd()  # probe: raises "No available kernel" with the reason in a warning
            except RuntimeError as e:
                why = "; ".join(first_line(w.message) for w in caught)
                msg = first_line(e) + (f" (warnings: {why})" if why else "")
                raise RuntimeError(msg[:400]) from None

        def bwd():
            torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

        for _ in range(3):  # warm-up
            fwd()
            bwd()
            both()
        if q.is_cuda:
            torch.cuda.synchronize()
        # batches of ~5 ms of work at 100 TF/s, at most 100 calls
        inner = max(1, min(100, int(5e11 / (3.5 * fl))))
        if not q.is_cuda:
            inner = 1
        return (median_time(timed, fwd, inner, repeats), median_time(timed, bwd, inner, repeats),
                median_time(timed, both, inner, repeats))


def make_inputs(torch, B, T, H, hd, dtype, device):
    g = torch.Generator(device="cpu").manual_seed(1234)
    qkv = [(torch.randn(B, H, T, hd, generator=g) * 1.5).to(device=device, dtype=dtype)
           .requires_grad_(True) for _ in range(3)]
    dout = (torch.randn(B, H, T, hd, generator=g) * 0.1).to(device=device, dtype=dtype)
    return qkv, dout


def format_line(label, B, T, H, hd, tf, tb, tfb, fl, shape_label):
    return (f"{label:<12s} B={B:<3d} T={T:<5d} H={H:<3d} hd={hd:<4d} "
            f"fwd {tf * 1e3:8.3f} ms {fl / tf * 1e-12:6.1f} TF/s | "
            f"bwd {tb * 1e3:8.3f} ms {2.5 * fl / tb * 1e-12:6.1f} TF/s | "
            f"fwd+bwd {tfb * 1e3:8.3f} ms {3.5 * fl / tfb * 1e-12:6.1f} TF/s | shape {shape_label}")


def published_text(val, src, note):
    if val is None:
        return f"not found ({note}) [{src}]"
    return f"{val} TF/s [{src}{'; ' + note if note else ''}]"


def published_lines(T, hd):
    rows = [(gpu, p, v) for (gpu, p, h, t), v in sorted(FA2_PUBLISHED.items()) if h == hd and t == T]
    if not rows:
        return [f"  FA2 published, not measured here: no figure found for hd={hd} T={T}"]
    return [f"  FA2 published, not measured here: {gpu} {p} hd={hd} T={T}: {published_text(*v)}"
            for gpu, p, v in rows]


def print_published_table():
    print("FlashAttention-2, published, not measured here (bf16/fp16, no causal mask, "
          "hidden 2048, batch 16k/T; TF/s, same FLOP convention):")
    for (gpu, p, hd, T), v in sorted(FA2_PUBLISHED.items()):
        print(f"  {gpu:<15s} {p:<8s} hd={hd:<4d} T={T:<5d} {published_text(*v)}")
    for sid, text in FA2_SOURCES.items():
        print(f"  [{sid}] {text}")


def run_shape(torch, timed, args, shape, dtype):
    """Benchmarks one shape on every backend; returns {backend: fwd+bwd TF/s}."""
    label, B, T, H, hd = shape
    fl = 4.0 * B * H * T * T * hd
    key = shape_key(label, B, T, H, hd)
    results = {}
    try:
        (q, k, v), dout = make_inputs(torch, B, T, H, hd, dtype, args.device)
    except RuntimeError as e:  # out of memory
        print(f"{'sdpa':<12s} {key}: skipped, cannot allocate inputs: {first_line(e)}")
        return results
    for be in args.backends:
        try:
            tf, tb, tfb = bench_backend(torch, timed, be, q, k, v, dout, fl, args.repeats)
        except (RuntimeError, NotImplementedError, ValueError) as e:
            print(f"{'sdpa-' + be:<12s} {key}: skipped: {first_line(e)}")
            continue
        print(format_line("sdpa-" + be, B, T, H, hd, tf, tb, tfb, fl, label))
        results[be] = 3.5 * fl / tfb * 1e-12
        sys.stdout.flush()
    for line in published_lines(T, hd):
        print(line)
    del q, k, v, dout
    if args.device == "cuda":
        torch.cuda.empty_cache()
    return results


def tflops_text(x):
    return f"{x:.1f}" if x >= 1 else f"{x:.3g}"  # the cpu smoke mode is far below 1 TF/s


def print_ratios(ours, measured):
    """ATTN_RATIO per line of ours and per shape measured here, keyed by (B, T, H, hd)."""
    for dims in list(ours) + [d for d in measured if d not in ours]:
        best = max(measured.get(dims, ("", {}))[1].items(), key=lambda kv: kv[1], default=None)
        s = f"{tflops_text(best[1])} ({best[0]})" if best else "n/a"
        for label, ours_tf in ours.get(dims, [(measured.get(dims, ("?", {}))[0], None)]):
            e = tflops_text(ours_tf) if ours_tf is not None else "n/a"
            r = f"{ours_tf / best[1]:.3f}" if best and best[1] > 0 and ours_tf is not None else "n/a"
            print(f"ATTN_RATIO shape={shape_key(label, *dims)} esmtrain={e} sdpa={s} ratio={r}")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    ours = {}
    if args.ours:
        try:
            ours = read_ours(args.ours)
        except OSError as e:
            print(f"error: cannot read --ours {args.ours}: {e}", file=sys.stderr)
            return 2
        if not ours:
            print(f"note: no bench_gpu_attention result lines in {args.ours}")
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: PyTorch is not importable ({e})")
        return 77
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("SKIP: no CUDA device (torch.cuda.is_available() is False)")
            return 77
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        shapes, where = GPU_SHAPES, torch.cuda.get_device_name(0)
    else:
        dtype, shapes, where = torch.float32, CPU_SHAPES, "CPU (smoke mode)"
        torch.set_num_threads(min(4, torch.get_num_threads()))  # tiny shapes: less noise
    print(f"{where}, torch {torch.__version__} sdpa, {str(dtype).replace('torch.', '')}, "
          f"median of {args.repeats}; flops: fwd 4*B*H*T^2*hd, bwd 2.5x")
    print_published_table()
    timed = make_timer(torch, args.device)
    measured = {}
    for shape in shapes:
        measured[shape[1:]] = (shape[0], run_shape(torch, timed, args, shape, dtype))
    for (shape, (label, res)) in measured.items():
        for be, tfs in (res or {}).items():
            record("attention_peer", f"torch sdpa {be}, {label} {shape}, {where}",
                   "python3 " + " ".join(sys.argv), {"fwd_bwd": (tfs, "TFLOP/s")})
    if args.ours:
        print_ratios(ours, measured)
    if not any(r for _, r in measured.values()):
        print("error: no SDPA backend ran on any shape", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
