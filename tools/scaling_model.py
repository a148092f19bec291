#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Data-parallel scaling model for esmtrain (issue #9, docs/scaling.md).

Per update and GPU: compute T_c = k * P * tokens / (MFU * peak) with k = 6
(8 with activation recompute). The gradient sum moves G = P * bytes_per_grad
in buckets of b bytes; each bucket costs
    t(b) = 2 (N-1)/N * b / BW + L(N),
with BW the per-GPU bus bandwidth NCCL reaches (NVLink inside a node,
the NIC share of a GPU across nodes) and L(N) the latency of one
all-reduce (ring: 2 (N-1) alpha; NCCL's tree across nodes: 2 log2(N) alpha
plus the in-node ring). Buckets overlap backward (the last 2/3 of the
step's compute; recompute adds its forward to that window); what does not
fit, plus the last bucket, is exposed. NCCL kernels share the SMs while
overlapping: a slowdown `interference` on the overlapped compute.
Stragglers: every update waits for the slowest of N GPUs; with per-update
compute jitter sigma (relative, normal) the expected maximum is about
sigma * sqrt(2 ln N) above the mean.
Efficiency = T_c / (T_c (1 + sigma sqrt(2 ln N)) + exposed + interference cost).
Numbers are assumptions stated below, not measurements."""
import math

A100 = dict(peak=312e12, mfu=0.40, nvlink_bw=200e9, nic_bw=22e9, alpha_in=5e-6, alpha_x=8e-6,
            gpus_per_node=8, interference=0.03, jitter=0.005)


def step(P, tokens, N, grad_bytes=4, bucket=25 << 20, recompute=False, hw=A100, algo="tree"):
    k = 8 if recompute else 6
    t_c = k * P * tokens / (hw["mfu"] * hw["peak"])
    window = t_c * (0.75 if recompute else 2 / 3)
    G = P * grad_bytes
    nb = math.ceil(G / bucket)
    if N == 1:
        return t_c, 0.0, 1.0
    inter = N > hw["gpus_per_node"]
    bw = hw["nic_bw"] if inter else hw["nvlink_bw"]
    if inter and algo == "tree":
        lat = 2 * math.log2(N / hw["gpus_per_node"]) * hw["alpha_x"] + 2 * (hw["gpus_per_node"] - 1) * hw["alpha_in"]
    else:
        lat = 2 * (N - 1) * (hw["alpha_x"] if inter else hw["alpha_in"])
    per_bucket = 2 * (N - 1) / N * (G / nb) / bw + lat
    t_comm = nb * per_bucket
    exposed = max(0.0, t_comm - per_bucket - window) + per_bucket
    slow = hw["interference"] * min(t_comm, window)
    wait = t_c * hw["jitter"] * math.sqrt(2 * math.log(N))
    return t_c, t_comm, t_c / (t_c + wait + exposed + slow)


def main():
    rows = []
    cases = [("esm2_t33_650M", 651e6, 16 * 1024, False), ("esm2_t36_3B", 2.84e9, 8 * 1024, True)]
    print("| model | tokens/GPU/update | grads | bucket | GPUs | compute s | all-reduce s | efficiency |")
    print("|---|---|---|---|---|---|---|---|")
    for name, P, tok, rc in cases:
        for gb, gname in ((4, "fp32"), (2, "bf16")):
            for bucket in (25 << 20,):
                for N in (8, 64, 256):
                    t_c, t_comm, eff = step(P, tok, N, gb, bucket, rc)
                    print(f"| {name}{' (recompute)' if rc else ''} | {tok} | {gname} | "
                          f"{bucket >> 20} MiB | {N} | {t_c:.3f} | {t_comm:.3f} | {100 * eff:.1f}% |")


if __name__ == "__main__":
    main()
