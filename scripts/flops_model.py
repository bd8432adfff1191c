#!/usr/bin/env python3
"""FLOPs, bytes and a roofline time of one training step, counted from an ESPnet config.

Paper estimates for docs/gpu.md ("On paper: an H100"); nothing here runs a model. The default
model is the E-Branchformer of ESPnet3's LibriSpeech-100 recipe
(espnet/espnet egs3/librispeech_100/asr/conf/tuning/train_e_branchformer.yaml: 12 E-Branchformer
blocks, d 256, 4 heads, rel-pos attention, cgMLP 1024 with kernel 31, macaron FFN 1024, merge conv
kernel 31; transformer decoder of 6 blocks with 2048 units; BPE 5000; ctc_weight 0.3;
batch_size 16, accumulate_grad_batches 4, precision bf16-mixed). --config reads the same keys
(model.encoder_conf, model.decoder_conf, tokenizer.vocab_size / model.vocab_size) from a YAML.

    scripts/flops_model.py [--config FILE] [--batch 16] [--seconds 12.7] [--tokens 45]
                           [--peak-tflops 989] [--hbm-tbps 3.35] [--launch-us 4] [--gpus 8 ...]

What is counted, per micro-batch of B utterances of `seconds` audio (T = 100 * seconds frames,
T' = T / 4 after the conv2d subsampling) and L tokens:
  - FLOPs: 2 m n k per GEMM (forward), 2x that for its backward (dX and dW); the attention's
    score and value products likewise; depthwise convolutions, norms, softmax, activations and
    the CTC / label-smoothing losses at a few FLOPs per element (they are memory-bound anyway).
  - Bytes (HBM traffic): every op reads its inputs and writes its outputs once (float32
    activations, as the CUDA backend keeps them; bf16-mixed GEMMs read 16-bit copies that a cast
    kernel writes), backward about twice the forward's traffic; the optimizer step reads and
    writes parameters, gradients and Adam's moments (28 bytes per parameter) plus clipping.
  - Roofline: each op takes max(flops / peak, bytes / bandwidth): GEMMs at the dense bf16
    tensor-core peak, our kernels at the FP32 CUDA-core peak (67 TFLOPS on an H100 SXM); plus a
    launch latency per kernel, which dominates for a model this small.
"""
import argparse
import math
import sys

DEFAULT = dict(d=256, heads=4, blocks=12, ffn=1024, cgmlp=1024, cgmlp_kernel=31, merge_kernel=31, macaron=True,
               dec_blocks=6, dec_units=2048, dec_heads=4, vocab=5000, n_mels=80, ctc_weight=0.3)


def from_config(path):
    import yaml

    c = yaml.safe_load(open(path))
    m = c.get("model", c)
    e, dc = m.get("encoder_conf", {}), m.get("decoder_conf", {}) or {}
    tok = c.get("tokenizer", {}) or {}
    v = m.get("vocab_size", tok.get("vocab_size", DEFAULT["vocab"]))
    if isinstance(v, str):
        v = tok.get("vocab_size", DEFAULT["vocab"])
    return dict(d=e.get("output_size", 256), heads=e.get("attention_heads", 4), blocks=e.get("num_blocks", 12),
                ffn=e.get("linear_units", 1024), cgmlp=e.get("cgmlp_linear_units", 1024),
                cgmlp_kernel=e.get("cgmlp_conv_kernel", 31), merge_kernel=e.get("merge_conv_kernel", 31),
                macaron=e.get("macaron_ffn", True), dec_blocks=dc.get("num_blocks", 0) if m.get("decoder") else 0,
                dec_units=dc.get("linear_units", 2048), dec_heads=dc.get("attention_heads", 4), vocab=int(v),
                n_mels=80, ctc_weight=m.get("model_conf", {}).get("ctc_weight", 0.3))


class Step:
    """Ops of one training step: (kind, name, fwd_flops, bytes fwd+bwd, kernels fwd+bwd)."""

    def __init__(self, act_bytes=4, gemm_in_bytes=2):
        self.ops = []
        self.params = 0
        self.a = act_bytes
        self.g = gemm_in_bytes

    def gemm(self, name, m, n, k, count=1, weight=True):
        """A GEMM (m x k) (k x n) and its backward; weight: the (k x n) operand is a parameter."""
        f = 2.0 * m * n * k * count
        # forward: cast A and B (read 4, write 2), GEMM reads both in 16 bits, writes C in fp32;
        # backward: dX and dW GEMMs (their inputs cast too) and dC read twice.
        cast = (m * k + k * n) * count * (self.a + self.g)
        fwd = cast + (m * k + k * n) * count * self.g + m * n * count * self.a
        bwd = 2 * cast + 2 * (m * n * count * (self.a + self.g)) + (m * k + k * n) * count * (self.g + self.a)
        self.ops.append(("gemm", name, f, 3 * f, fwd + bwd, 3 * 3))
        if weight:
            self.params += k * n

    def elem(self, name, n, flops_per=5, reads=1, writes=1, kernels=2):
        """A kernel over n elements (norm, activation, softmax, dropout, residual add...)."""
        f = float(flops_per) * n
        b = (reads + writes) * n * self.a * 3  # backward reads dy and the saved input, writes dx
        self.ops.append(("kernel", name, f, 3 * f, b, kernels))

    def bias(self, n):
        self.params += n


def count(cfg, B, T, L):
    s = Step()
    d, h = cfg["d"], cfg["heads"]
    # conv2d subsampling: 3x3 stride 2 twice, 1 -> d -> d channels, then a linear.
    f1, t1 = (cfg["n_mels"] - 1) // 2, (T - 1) // 2
    f2, t2 = (f1 - 1) // 2, (t1 - 1) // 2
    s.elem("conv2d_1 (1 channel, direct)", B * t1 * f1 * d, flops_per=2 * 9, kernels=3)
    s.params += 9 * d + d
    s.gemm("conv2d_2 (im2col)", B * t2 * f2, d, 9 * d)
    s.bias(d)
    s.elem("im2col + relu", B * t2 * f2 * 9 * d, flops_per=1, kernels=4)
    Tp = t2
    N = B * Tp
    s.gemm("subsampling linear", N, d, d * f2)
    s.bias(d)
    for _ in range(cfg["blocks"]):
        for ff in range(2 if cfg["macaron"] else 1):
            s.elem("layernorm", N * d, flops_per=8)
            s.params += 2 * d
            s.gemm("ffn w1", N, cfg["ffn"], d)
            s.bias(cfg["ffn"])
            s.elem("swish+dropout", N * cfg["ffn"], flops_per=6)
            s.gemm("ffn w2", N, d, cfg["ffn"])
            s.bias(d)
            s.elem("scale+residual", N * d, flops_per=2, reads=2)
        # branch 1: rel-pos self-attention
        s.elem("layernorm", N * d, flops_per=8)
        s.params += 2 * d
        s.gemm("q,k,v", N, 3 * d, d)
        s.bias(3 * d)
        s.gemm("linear_pos", 2 * Tp - 1, d, d, weight=True)
        s.params += 2 * d  # pos_bias_u, pos_bias_v
        hd = d // h
        s.gemm("scores q(k)^T", Tp, Tp, hd, count=B * h, weight=False)
        s.gemm("scores q(p)^T", Tp, 2 * Tp - 1, hd, count=B * h, weight=False)
        s.elem("rel_shift+softmax+dropout", B * h * Tp * Tp, flops_per=10, reads=2, kernels=3)
        s.gemm("att v", Tp, hd, Tp, count=B * h, weight=False)
        s.gemm("att out", N, d, d)
        s.bias(d)
        # branch 2: cgMLP
        s.elem("layernorm", N * d, flops_per=8)
        s.params += 2 * d
        s.gemm("channel_proj1", N, cfg["cgmlp"], d)
        s.bias(cfg["cgmlp"])
        s.elem("gelu", N * cfg["cgmlp"], flops_per=10)
        half = cfg["cgmlp"] // 2
        s.elem("csgu layernorm", N * half, flops_per=8)
        s.params += 2 * half
        s.elem("csgu depthwise conv", N * half, flops_per=2 * cfg["cgmlp_kernel"], kernels=3)
        s.params += half * cfg["cgmlp_kernel"] + half
        s.elem("gate multiply", N * half, flops_per=1, reads=2)
        s.gemm("channel_proj2", N, d, half)
        s.bias(d)
        # merge: concat, depthwise conv over 2d, merge_proj
        s.elem("concat", N * 2 * d, flops_per=0)
        s.elem("merge depthwise conv", N * 2 * d, flops_per=2 * cfg["merge_kernel"], kernels=3)
        s.params += 2 * d * cfg["merge_kernel"] + 2 * d
        s.gemm("merge_proj", N, d, 2 * d)
        s.bias(d)
        s.elem("residual+dropout", N * d, flops_per=3, reads=2)
        s.elem("final layernorm", N * d, flops_per=8)
        s.params += 2 * d
    s.elem("encoder after_norm", N * d, flops_per=8)
    s.params += 2 * d
    V = cfg["vocab"]
    # CTC branch
    s.gemm("ctc_lo", N, V, d)
    s.bias(V)
    s.elem("ctc log_softmax", N * V, flops_per=5, kernels=2)
    s.elem("ctc loss (alpha/beta)", B * Tp * (2 * L + 1), flops_per=30, reads=1, writes=2, kernels=4)
    if cfg["dec_blocks"]:
        M = B * (L + 1)
        s.params += V * d  # embedding
        s.elem("embedding+posenc", M * d, flops_per=2)
        hd = d // cfg["dec_heads"]
        for _ in range(cfg["dec_blocks"]):
            for _a in range(2):
                s.elem("layernorm", M * d, flops_per=8)
                s.params += 2 * d
            s.gemm("self q,k,v", M, 3 * d, d)
            s.bias(3 * d)
            s.gemm("self scores", L + 1, L + 1, hd, count=B * cfg["dec_heads"], weight=False)
            s.gemm("self att v", L + 1, hd, L + 1, count=B * cfg["dec_heads"], weight=False)
            s.elem("softmax", B * cfg["dec_heads"] * (L + 1) ** 2, flops_per=8)
            s.gemm("self out", M, d, d)
            s.bias(d)
            s.gemm("src q", M, d, d)
            s.gemm("src k,v (encoder)", N, 2 * d, d)
            s.bias(3 * d)
            s.gemm("src scores", L + 1, Tp, hd, count=B * cfg["dec_heads"], weight=False)
            s.gemm("src att v", L + 1, hd, Tp, count=B * cfg["dec_heads"], weight=False)
            s.elem("softmax", B * cfg["dec_heads"] * (L + 1) * Tp, flops_per=8)
            s.gemm("src out", M, d, d)
            s.bias(d)
            s.elem("layernorm", M * d, flops_per=8)
            s.params += 2 * d
            s.gemm("ffn w1", M, cfg["dec_units"], d)
            s.bias(cfg["dec_units"])
            s.elem("relu+dropout", M * cfg["dec_units"], flops_per=2)
            s.gemm("ffn w2", M, d, cfg["dec_units"])
            s.bias(d)
            s.elem("residuals", 3 * M * d, flops_per=1, reads=2)
        s.elem("decoder after_norm", M * d, flops_per=8)
        s.params += 2 * d
        s.gemm("output_layer", M, V, d)
        s.bias(V)
        s.elem("log_softmax + label smoothing", M * V, flops_per=8, kernels=3)
    return s, Tp


def roofline(s, P, peak, fp32_peak, bw, launch):
    t_gemm = t_kern = t_launch = 0.0
    for kind, _name, _ff, f, b, k in s.ops:
        t = max(f / (peak if kind == "gemm" else fp32_peak), b / bw)
        if kind == "gemm":
            t_gemm += t
        else:
            t_kern += t
        t_launch += k * launch
    # optimizer step per optimizer step (amortized over accumulation by the caller): Adam reads
    # p, g, m, v and writes p, m, v (28 B/param); clipping reads g twice and writes it (12 B);
    # zero_grad writes g (4 B).
    opt_bytes = 44 * P
    return t_gemm, t_kern, t_launch, opt_bytes / bw, opt_bytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config")
    ap.add_argument("--batch", type=int, default=16, help="utterances per micro-batch (batch_size 16)")
    ap.add_argument("--seconds", type=float, default=12.7, help="seconds per utterance (LibriSpeech-100 mean 12.7)")
    ap.add_argument("--tokens", type=int, default=45, help="BPE-5000 tokens per utterance")
    ap.add_argument("--accumulate", type=int, default=4, help="accumulate_grad_batches")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 tensor-core peak (H100 SXM)")
    ap.add_argument("--fp32-tflops", type=float, default=67.0, help="FP32 CUDA-core peak (H100 SXM)")
    ap.add_argument("--hbm-tbps", type=float, default=3.35)
    ap.add_argument("--launch-us", type=float, default=4.0, help="latency per kernel launch (no CUDA graphs)")
    ap.add_argument("--gpus", type=int, nargs="*", default=[8, 16, 32])
    ap.add_argument("--nvlink-gbs", type=float, default=900.0)
    ap.add_argument("--ib-gbps", type=float, default=400.0, help="InfiniBand per GPU, Gbit/s (NDR)")
    ap.add_argument("--utts", type=int, default=281241, help="LibriSpeech-960 training utterances")
    a = ap.parse_args()
    cfg = from_config(a.config) if a.config else DEFAULT
    T = int(round(a.seconds * 100))
    s, Tp = count(cfg, a.batch, T, a.tokens)
    P = s.params
    fwd = sum(o[2] for o in s.ops)
    tot = sum(o[3] for o in s.ops)
    gemm = sum(o[3] for o in s.ops if o[0] == "gemm")
    byts = sum(o[4] for o in s.ops)
    kernels = sum(o[5] for o in s.ops)
    peak, fp32, bw, launch = a.peak_tflops * 1e12, a.fp32_tflops * 1e12, a.hbm_tbps * 1e12, a.launch_us * 1e-6
    tg, tk, tl, topt, optb = roofline(s, P, peak, fp32, bw, launch)
    print(f"model: {cfg}")
    print(f"parameters: {P / 1e6:.2f} M")
    print(f"micro-batch: {a.batch} utterances x {a.seconds} s = {T} frames -> {Tp} after subsampling, {a.tokens} tokens")
    print(f"FLOPs per micro-batch: forward {fwd / 1e12:.3f} TFLOP, forward+backward {tot / 1e12:.3f} TFLOP "
          f"({100 * gemm / tot:.1f}% in GEMMs)")
    print(f"HBM bytes per micro-batch (forward+backward): {byts / 1e9:.2f} GB; optimizer step: {optb / 1e9:.2f} GB")
    print(f"kernel launches per micro-batch: ~{kernels}")
    print(f"roofline per micro-batch on the H100: cuBLAS GEMMs {tg * 1e3:.2f} ms, our kernels {tk * 1e3:.2f} ms, "
          f"launch latency {tl * 1e3:.2f} ms (at {a.launch_us} us each)")
    share = tg / (tg + tk)
    print(f"  share of the roofline time: cuBLAS {100 * share:.0f}%, our kernels {100 * (1 - share):.0f}% "
          f"(launch latency excluded)")
    t_micro = tg + tk + tl
    t_step = a.accumulate * t_micro + topt
    print(f"  per optimizer step ({a.accumulate} micro-batches + Adam {topt * 1e3:.3f} ms): {t_step * 1e3:.1f} ms; "
          f"without launch latency {(a.accumulate * (tg + tk) + topt) * 1e3:.1f} ms")
    print(f"  ideal (all FLOPs at peak): {tot / peak * 1e3:.2f} ms per micro-batch; "
          f"all bytes at HBM speed: {byts / bw * 1e3:.2f} ms")
    grad_bytes = 4 * P
    print(f"all-reduce of float32 gradients: {grad_bytes / 1e6:.0f} MB per optimizer step; ring 2(n-1)/n * bytes:")
    for n in a.gpus:
        ring = 2 * (n - 1) / n * grad_bytes
        nv = ring / (a.nvlink_gbs * 1e9)
        ib = ring / (a.ib_gbps / 8 * 1e9)
        per_gpu_epoch = a.utts / (a.batch * n)
        print(f"  {n:3d} GPUs ({math.ceil(n / 8)} node(s) of 8): {ring / 1e6:.0f} MB per GPU; NVLink {nv * 1e3:.2f} ms, "
              f"InfiniBand {ib * 1e3:.2f} ms; {per_gpu_epoch:.0f} steps of {a.batch * n} utterances per "
              f"LibriSpeech-960 epoch (accumulate 1), ~{per_gpu_epoch * t_micro / 60:.1f} min of compute per epoch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
