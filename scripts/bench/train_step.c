/* Driver of scripts/bench/train_step: times one training step (forward + loss + backward + Adam)
 * on a batch of 16 x 400 frames x 80 dims with 50 labels, dropout 0.1 as the references' train
 * mode. MODEL (default transformer):
 *   transformer: the reference model (Transformer encoder d 256, 4 heads, FF 1024, 6 blocks,
 *                conv2d subsampling) + CTC, vocab 30
 *   conformer:   ConformerEncoder (d 256, 4 heads, FF 1024, 6 blocks, kernel 31, rel_pos latest,
 *                macaron, swish) + CTC, vocab 30 (scripts/bench/espnet_step.py --model conformer)
 *   hybrid:      the transformer encoder + a 3-block TransformerDecoder (4 heads, FF 1024), joint
 *                loss ctc_weight 0.3, lsm_weight 0.1 (espnet_step.py --model hybrid); labels
 *                2..28 so that none is <sos/eos> (29)
 *   ebranchformer: EBranchformerEncoder as LibriSpeech-100's (d 256, 4 heads, rel_pos latest,
 *                macaron FFN 1024, cgMLP 1024 with kernel 31, identity gate, merge kernel 31) but
 *                6 blocks like the others, + CTC, vocab 30 (espnet_step.py --model ebranchformer)
 *   ls100:       the LibriSpeech-100 recipe's model at its size (ESPnet3 egs3/librispeech_100
 *                train_e_branchformer.yaml, as scripts/flops_model.py's default): the E-Branchformer
 *                above with 12 blocks, a 6-block TransformerDecoder (4 heads, 2048 units), BPE 5000,
 *                ctc_weight 0.3, lsm_weight 0.1, on 16 utterances of 12.7 s (1270 frames) with 45
 *                tokens (espnet_step.py --model ls100)
 *   rnnt:        a Conformer RNN-T: the conformer encoder above, BPE 256, ESPnet2's ASR task with
 *                decoder: transducer as LibriSpeech-100's conformer-rnn_transducer and mini_an4's
 *                training_asr_transducer.yaml set it (TransducerDecoder: one LSTM layer, embed and
 *                hidden 256, dropout 0.1, dropout_embed 0.2; JointNetwork joint_space_size 256,
 *                tanh) + CTC, ctc_weight 0.3 (espnet_step.py --model rnnt)
 *   lm:          a character LM as the default recipe's: SequentialRNNLM (2-layer LSTM, LM_UNIT
 *                units, default 384; dropout LM_DROPOUT, default 0) in ESPnetLanguageModel, vocab
 *                31, on a batch of 160 texts of 63 tokens (about the recipe's 10,000 per batch;
 *                espnet_step.py --model lm reads the same variables)
 *   train_step [--openblas] [--model MODEL] THREADS STEPS WARMUP -> prints "ms <median> min <min>
 *                loss <last> ... cpu_ms <median user CPU> ... xsmm <0|1>" (cpu_ms: the process'
 *                user CPU time per step, every thread's, median over the timed steps; xsmm: whether
 *                libxsmm's kernels ran the products they take; --openblas: every product through
 *                OpenBLAS, for scripts/bench/gemm_shapes)
 *   ESPNET3_PROFILE=1 profiles the timed steps (core/compute/backend_profile.h): the report goes to
 *   stderr and the summary line gains "roofline_ms <the steps' roofline / steps>"
 *   TRAIN_STEP_SHAPE=BxTxL: another batch than the model's (not lm)
 *   TRAIN_STEP_JOINT_FLOATS=N: the transducer's joint chunk budget in floats (rnnt; default
 *   core/nn/transducer.h's TRANSDUCER_JOINT_FLOATS), for trading its peak memory against its time
 *   TRAIN_STEP_BACKEND=cuda runs the step on the GPU (a CUDA build's objects); TRAIN_STEP_PRECISION
 *   bf16 or fp16 runs every GEMM on 16-bit copies of its inputs, as trainer.precision bf16-mixed /
 *   16-mixed (default fp32)
 *   train_step --sgemm THREADS         -> prints "gflops <best> backend <b> openblas <o>": the
 *                                         machine's sgemm peak (2048^3, best of 5 after a warm-up),
 *                                         the better of the backend's and OpenBLAS' on its own
 *                                         threads, which the step's GFLOP/s are compared with */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>

#include "core/compute/backend.h"
#include "core/compute/backend_profile.h"
#include "core/compute/blas_core.h"
#include "core/compute/ops_xsmm.h"
#include "core/nn/model.h"
#include "core/nn/transducer.h"
#include "core/train/optim.h"
#include "core/base/progress.h"
#include "core/base/rng.h"

/* The process' user CPU time so far (all its threads), in milliseconds: on a shared host the
 * step's own work, what the wall clock mixes with the other processes' turns. */
static double user_cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec * 1e-3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The best of 5 rates (after a warm-up call) of C = A B, 2048^3, through gemm. */
static double best_rate(void (*gemm)(void *ctx, const float *a, const float *b, float *c, int n), void *ctx,
                        const float *a, const float *b, float *c, int n)
{
    double best = 0;
    for (int r = 0; r < 6; r++) {
        double t0 = now_seconds();
        gemm(ctx, a, b, c, n);
        double g = 2.0 * n * n * n / (now_seconds() - t0) * 1e-9;
        if (r > 0 && g > best) best = g;
    }
    return best;
}

static void backend_gemm(void *ctx, const float *a, const float *b, float *c, int n)
{
    backend *be = ctx;
    be->gemm(be, 0, 0, n, n, n, 1, a, n, b, n, 0, c, n);
}

static void openblas_gemm(void *ctx, const float *a, const float *b, float *c, int n)
{
    (void)ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
}

/* The machine's sgemm peak, what "% of sgemm peak" divides by: the better of espnet3's backend
 * (libxsmm's kernels on AVX-512 CPUs, split over its pool) and OpenBLAS on its own threads, on a
 * large square product. Either may be the faster: on an Emerald Rapids Xeon OpenBLAS' SkylakeX
 * kernels reached 146-153 GFLOP/s at one thread and 273 at two against the backend's 100 / 195. */
static int sgemm_peak(int threads)
{
    enum { N = 2048 };
    backend *be;
    esp_err err;
    if (!(be = backend_open(BACKEND_CPU, 0, threads, &err))) esp_die_err(&err);
    float *a = be->alloc(be, (size_t)N * N * sizeof(float)), *b = be->alloc(be, (size_t)N * N * sizeof(float));
    float *c = be->alloc(be, (size_t)N * N * sizeof(float));
    for (size_t i = 0; i < (size_t)N * N; i++) a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    double ours = best_rate(backend_gemm, be, a, b, c, N);
    openblas_set_num_threads(threads);
    double blas = best_rate(openblas_gemm, NULL, a, b, c, N);
    openblas_set_num_threads(1);
    printf("gflops %.1f backend %.1f openblas %.1f\n", ours > blas ? ours : blas, ours, blas);
    be->free(be, a), be->free(be, b), be->free(be, c);
    backend_close(be);
    return 0;
}

int main(int argc, char **argv)
{
    blas_core_select(argv); /* OpenBLAS' kernels as espnet3 runs them (core/compute/blas_core.h) */
    if (argc > 2 && strcmp(argv[1], "--sgemm") == 0) return sgemm_peak(atoi(argv[2]));
    if (argc > 1 && strcmp(argv[1], "--openblas") == 0) ops_xsmm_enable(0), argv++, argc--;
    const char *kind = "transformer";
    if (argc > 2 && strcmp(argv[1], "--model") == 0) kind = argv[2], argv += 2, argc -= 2;
    int conformer = strcmp(kind, "conformer") == 0, hybrid = strcmp(kind, "hybrid") == 0;
    int ebf = strcmp(kind, "ebranchformer") == 0, lm = strcmp(kind, "lm") == 0, ls100 = strcmp(kind, "ls100") == 0;
    int rnnt = strcmp(kind, "rnnt") == 0;
    if (!conformer && !hybrid && !ebf && !lm && !ls100 && !rnnt && strcmp(kind, "transformer") != 0) {
        fprintf(stderr,
                "train_step: unknown model %s (transformer, conformer, hybrid, ebranchformer, ls100, rnnt or lm)\n",
                kind);
        return 2;
    }
    int threads = argc > 1 ? atoi(argv[1]) : 1, steps = argc > 2 ? atoi(argv[2]) : 10;
    int warmup = argc > 3 ? atoi(argv[3]) : 3;
    enum { B_ASR = 16, T_ASR = 400, L_ASR = 50, T_LS100 = 1270, L_LS100 = 45, B_LM = 160, L_LM = 63 };
    int B = lm ? B_LM : B_ASR, L = lm ? L_LM : ls100 ? L_LS100 : L_ASR, T = ls100 ? T_LS100 : T_ASR;
    /* TRAIN_STEP_SHAPE=BxTxL: B utterances of T frames and L labels instead (scripts/cuda_emu/run
     * launches counts a step's launches on the emulation at a small batch) */
    const char *shape = getenv("TRAIN_STEP_SHAPE");
    if (shape && !lm && (sscanf(shape, "%dx%dx%d", &B, &T, &L) != 3 || B < 1 || T < 16 || L < 1)) {
        fprintf(stderr, "train_step: TRAIN_STEP_SHAPE %s (BxTxL: utterances, frames >= 16, labels)\n", shape);
        return 2;
    }
    model_dims d = {.idim = 80, .d = 256, .heads = 4, .ff = 1024, .blocks = 6, .vocab = 30};
    /* LM_UNIT, LM_DROPOUT: the LM's width and dropout rate (384, 0: the bench's default case) */
    int lm_unit = getenv("LM_UNIT") ? atoi(getenv("LM_UNIT")) : 384;
    float lm_dropout = getenv("LM_DROPOUT") ? (float)atof(getenv("LM_DROPOUT")) : 0.0f;
    if (lm) d = (model_dims){.lm = LM_SEQ_RNN, .no_ctc = 1, .vocab = 31, .lm_embed = lm_unit, .d = lm_unit, .lm_layers = 2};
    d.f2 = ((d.idim - 1) / 2 - 1) / 2;
    if (conformer || rnnt) {
        d.encoder = ENC_CONFORMER, d.macaron = 1, d.rel_pos = 1, d.use_cnn = 1, d.cnn_kernel = 31;
        d.act = ACT_SWISH;
    }
    if (ebf || ls100) {
        d.encoder = ENC_EBRANCHFORMER, d.macaron = 1, d.rel_pos = 1, d.act = ACT_SWISH, d.use_ffn = 1;
        d.cgmlp_units = 1024, d.cgmlp_kernel = 31, d.gate_act = ACT_IDENTITY, d.merge_kernel = 31;
    }
    if (hybrid) d.dec_blocks = 3, d.dec_heads = 4, d.dec_ff = 1024;
    if (ls100) d.blocks = 12, d.dec_blocks = 6, d.dec_heads = 4, d.dec_ff = 2048, d.vocab = 5000;
    if (rnnt) d.vocab = 256, d.tr_layers = 1, d.tr_hidden = 256, d.tr_joint = 256;
    backend *be;
    esp_err err;
    /* TRAIN_STEP_BACKEND=cuda times the step on the GPU (a CUDA build's objects). */
    const char *kind_name = getenv("TRAIN_STEP_BACKEND");
    backend_kind kind_be = BACKEND_CPU;
    if (kind_name && backend_kind_parse(kind_name, &kind_be, &err) != 0) esp_die_err(&err);
    if (!(be = backend_open(kind_be, 0, threads, &err))) esp_die_err(&err);
    const char *prec = getenv("TRAIN_STEP_PRECISION");
    if (prec && strcmp(prec, "fp32") != 0) {
        if (strcmp(prec, "bf16") != 0 && strcmp(prec, "fp16") != 0) {
            fprintf(stderr, "train_step: TRAIN_STEP_PRECISION %s (fp32, bf16 or fp16)\n", prec);
            return 2;
        }
        be->set_gemm_precision(be, strcmp(prec, "bf16") == 0 ? AMP_BF16 : AMP_FP16);
    }
    model_rates rates = {.dropout = 0.1f, .pos_dropout = 0.1f, .att_dropout = 0.0f, .ctc_weight = 1.0f};
    if (lm) rates.dec_dropout = lm_dropout;
    if (hybrid || ls100) {
        rates.dec_dropout = 0.1f, rates.dec_pos_dropout = 0.1f;
        rates.ctc_weight = 0.3f, rates.lsm_weight = 0.1f, rates.length_normalized_loss = 0;
    }
    if (rnnt) rates.ctc_weight = 0.3f, rates.tr_dropout = 0.1f, rates.tr_dropout_embed = 0.2f;
    asr_model m;
    asr_model_init(&m, be, &d, &rates);
    /* TRAIN_STEP_JOINT_FLOATS: the transducer's joint chunk budget (core/nn/transducer.h) */
    if (m.tr && getenv("TRAIN_STEP_JOINT_FLOATS"))
        transducer_set_joint_floats(&m, (size_t)strtoull(getenv("TRAIN_STEP_JOINT_FLOATS"), NULL, 10));
    float *host = malloc(m.table.total * sizeof *host);
    if (param_init(host, &m.table, NULL, 0, &err) != 0) esp_die_err(&err);
    asr_model_params_from_host(&m, host);
    free(host);
    float *feats = malloc((size_t)B * T * 80 * sizeof *feats);
    rng r;
    rng_init(&r, 1);
    for (size_t i = 0; i < (size_t)B * T * 80; i++) feats[i] = (float)((double)(rng_next(&r) >> 11) / 9007199254740992.0 * 2 - 1);
    int *lens = malloc((size_t)B * sizeof *lens), *labels = malloc((size_t)B * L * sizeof *labels);
    int *ylens = malloc((size_t)B * sizeof *ylens);
    for (int b = 0; b < B; b++) lens[b] = T, ylens[b] = L;
    /* never blank (0), <unk> (1) or <sos/eos> (vocab - 1) */
    int top = ls100 || rnnt ? d.vocab - 2 : conformer || hybrid || ebf || lm ? 28 : 29;
    for (int i = 0; i < B * L; i++) labels[i] = (int)rng_uniform_int(&r, 2, top);
    float *dev_feats = be->alloc(be, (size_t)B * T * 80 * sizeof *feats);
    be->copy(be, dev_feats, feats, (size_t)B * T * 80 * sizeof *feats, BACKEND_HOST_TO_DEVICE);
    optim_opts o = optim_opts_default(OPTIM_ADAM);
    optim_state st;
    optim_state_init(&st, be, m.table.total, &o);
    double *ms = malloc((size_t)steps * sizeof *ms), *cpu = malloc((size_t)steps * sizeof *cpu), loss = 0;
    int profile = backend_profile_requested();
    for (int i = 0; i < warmup + steps; i++) {
        if (profile && i == warmup) backend_profile_start(be);
        double t0 = now_seconds(), c0 = user_cpu_ms();
        asr_model_zero_grad(&m);
        if (lm) asr_model_forward(&m, NULL, NULL, B, 0, 1, (uint64_t)i);
        else asr_model_forward(&m, dev_feats, lens, B, T, 1, (uint64_t)i);
        loss = asr_model_loss(&m, labels, ylens, L, NULL);
        asr_model_backward(&m, 1.0f);
        optim_step(m.params, &st, m.grads, &o, 1e-3);
        be->synchronize(be); /* the GPU's queued work belongs to this step */
        double t = now_seconds() - t0;
        if (i >= warmup) ms[i - warmup] = t * 1e3, cpu[i - warmup] = user_cpu_ms() - c0;
    }
    qsort(ms, (size_t)steps, sizeof *ms, cmp);
    qsort(cpu, (size_t)steps, sizeof *cpu, cmp);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char roof[48] = "";
    if (profile) {
        char what[64];
        snprintf(what, sizeof what, "train_step %s, %d steps", kind, steps);
        backend_profile_report(be, what, stderr);
        snprintf(roof, sizeof roof, " roofline_ms %.2f", 1e3 * backend_profile_roofline_seconds(be) / steps);
    }
    printf("ms %.1f min %.1f loss %.3f maxrss_mb %.0f params %zu model %s cpu_ms %.1f xsmm %d precision %s openblas "
           "%s%s\n",
           ms[steps / 2], ms[0], loss, ru.ru_maxrss / 1024.0, m.table.total, kind, cpu[steps / 2], ops_xsmm_enabled(),
           prec ? prec : "fp32", blas_core_name(), roof);
    optim_state_free(&st);
    be->free(be, dev_feats);
    asr_model_free(&m);
    backend_close(be);
    free(feats);
    free(lens), free(labels), free(ylens);
    free(ms), free(cpu);
    return 0;
}
