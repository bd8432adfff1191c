/* Stage 6 infer (alias decode): decodes every test set of the inference config with the trained
 * Transformer-CTC model, through the runner (parallel:), and writes ESPnet3's
 * ${inference_dir}/<test>/hyp.scp and ref.scp (`utt_id text`, manifest order).
 *
 * The decoding itself is core/decode/speech2text.h; this stage turns the config into its options,
 * creates the backend, and runs the test set through the runner: each worker's provider opens the
 * decoder once and decodes its utterances one runner call each (shards are whole batch_size
 * batches, so a rerun with the same batch_size keeps finished shards).
 * Each worker computes on the same number of threads whatever n_workers is (1, or
 * OMP_NUM_THREADS), and the decoder runs one forward per utterance, so hyp.scp is byte-identical
 * for any batch_size and n_workers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/base/progress.h"
#include "core/compute/backend.h"
#include "core/data/frontend.h"
#include "core/decode/speech2text.h"
#include "core/formats/manifest.h"
#include "core/nn/model_files.h"
#include "core/runner/runner.h"
#include "stages/stages.h"

typedef struct decode_opts {
    s2t_opts s2t;
    int batch_size;
    int threads;              /* per worker */
    const char *backend_kind; /* from model.device (backend_kind_for); a GPU worker sees its device as 0 */
} decode_opts;

/* What every worker needs to build its decoder (paths, so a worker can be any process). */
typedef struct infer_job {
    const model_files *mf;
    const manifest *m;    /* ids, audio paths and references */
    decode_opts opts;
} infer_job;

typedef struct infer_env {
    const infer_job *job;
    backend *be;
    speech2text *s2t;
    /* The last decoded batch: items [lo, hi), one result record each. */
    size_t lo, hi;
    runner_buf *results;
} infer_env;

static void release(void *p)
{
    infer_env *env = p;
    if (!env) return;
    for (size_t i = env->lo; i < env->hi; i++) runner_buf_free(&env->results[i - env->lo]);
    free(env->results);
    speech2text_close(env->s2t); /* before the backend it borrows */
    backend_close(env->be);
    free(env);
}

/* Builds a decoder from the files alone: backend, then model, weights and features. */
static void *provide(void *arg, esp_err *err)
{
    const infer_job *job = arg;
    infer_env *env = xcalloc(1, sizeof *env);
    env->job = job;
    if (!(env->be = backend_open(job->opts.backend_kind, 0, job->opts.threads, err))) goto fail;
    env->s2t = speech2text_open(env->be, job->mf, &job->opts.s2t, err);
    if (!env->s2t) goto fail;
    env->results = xcalloc((size_t)job->opts.batch_size, sizeof *env->results);
    return env;
fail:
    release(env);
    return NULL;
}

static const char *item_name(size_t idx, void *arg) { return ((infer_job *)arg)->m->items[idx].utt; }

/* Result record of one utterance: u32 feature frames, then the hypothesis text. */
static int decode_batch(infer_env *env, size_t lo, size_t hi, esp_err *err)
{
    for (size_t i = env->lo; i < env->hi; i++) runner_buf_free(&env->results[i - env->lo]);
    env->lo = env->hi = 0;
    int n = (int)(hi - lo);
    const char **paths = xmalloc((size_t)n * sizeof *paths);
    for (int i = 0; i < n; i++) paths[i] = env->job->m->items[lo + (size_t)i].wav;
    s2t_hyp *hyps = xcalloc((size_t)n, sizeof *hyps);
    int rc = speech2text_decode_files(env->s2t, paths, n, hyps, err);
    for (int i = 0; i < n && rc == 0; i++) {
        uint32_t frames = (uint32_t)hyps[i].frames;
        runner_buf *out = &env->results[i];
        out->len = 0;
        runner_buf_append(out, &frames, sizeof frames);
        runner_buf_append(out, hyps[i].text, strlen(hyps[i].text));
        s2t_hyp_free(&hyps[i]);
    }
    free(hyps);
    free(paths);
    if (rc != 0) return -1;
    env->lo = lo, env->hi = hi;
    return 0;
}

/* The decoder runs one forward per utterance, so each item is decoded on its own call: an
 * unreadable file fails the call of its own utterance, which the runner names (shards stay whole
 * batches, so a rerun with another batch_size finds them). */
static int forward(size_t idx, void *p, runner_buf *out, esp_err *err)
{
    infer_env *env = p;
    if (idx < env->lo || idx >= env->hi) {
        if (decode_batch(env, idx, idx + 1, err) != 0) return -1;
    }
    const runner_buf *r = &env->results[idx - env->lo];
    runner_buf_append(out, r->data, r->len);
    return 0;
}

typedef struct merge_ctx {
    const manifest *m;
    FILE *hyp;
    double frames;
    esp_err *err;
} merge_ctx;

static int merge_one(size_t idx, const void *data, size_t len, void *p)
{
    merge_ctx *c = p;
    if (len < sizeof(uint32_t)) return esp_fail(c->err, "infer: result of %s is truncated", c->m->items[idx].utt);
    uint32_t frames;
    memcpy(&frames, data, sizeof frames);
    c->frames += frames;
    fprintf(c->hyp, "%s %.*s\n", c->m->items[idx].utt, (int)(len - sizeof frames), (const char *)data + sizeof frames);
    return 0;
}

static int write_ref(const char *path, const manifest *m, esp_err *err)
{
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) return -1;
    for (size_t i = 0; i < m->n; i++) fprintf(af.fp, "%s %s\n", m->items[i].utt, m->items[i].text);
    return atomic_commit(&af, err);
}

static uint64_t hash_file(uint64_t h, const char *path, esp_err *err, int *failed)
{
    size_t len;
    char *text = read_file(path, &len, err);
    if (!text) {
        *failed = 1;
        return h;
    }
    h = fnv1a64_bytes(h, text, len);
    free(text);
    return h;
}

static int decode_set(const inference_cfg *icfg, const model_files *mf, const decode_opts *o, const char *test,
                      esp_err *err)
{
    char *manifest_path = xasprintf("%s/manifest/%s.tsv", icfg->data_dir, test);
    char *out_dir = xasprintf("%s/%s", icfg->inference_dir, test);
    char *work_dir = xasprintf("%s/.runner", out_dir);
    char *hyp_path = xasprintf("%s/hyp.scp", out_dir), *ref_path = xasprintf("%s/ref.scp", out_dir);
    manifest m = {0};
    char *sig = NULL, *label = NULL;
    int rc = -1;
    if (!path_exists(manifest_path)) {
        esp_fail(err, "%s: no manifest for test set '%s' (run create_dataset, stage 1, or fix test_sets / data_dir)",
                 manifest_path, test);
        goto out;
    }
    if (manifest_read_tsv(manifest_path, &m, err) != 0 || mkdir_p(out_dir, err) != 0) goto out;
    if (m.n == 0) {
        esp_fail(err, "%s: test set '%s' has no utterances", manifest_path, test);
        goto out;
    }
    /* Same inputs, model and search = same job: a rerun reuses finished shards. batch_size is left
     * out on purpose (it does not change results), but it sets the shard size. */
    int failed = 0;
    uint64_t h = hash_file(FNV1A64_INIT, manifest_path, err, &failed);
    h = hash_file(h, mf->weights, err, &failed);
    h = hash_file(h, mf->tokens, err, &failed);
    if (mf->stats) h = hash_file(h, mf->stats, err, &failed);
    h = hash_file(h, mf->train_config_path, err, &failed);
    if (failed) goto out;
    sig = xasprintf("infer %016" PRIx64 " beam %d penalty %.17g", h, o->s2t.beam_size, o->s2t.penalty);
    infer_job job = {.mf = mf, .m = &m, .opts = *o};
    size_t n_workers = icfg->parallel && icfg->parallel->n_workers > 0 ? (size_t)icfg->parallel->n_workers : 1;
    label = xasprintf("infer %s", test);
    /* The runner chooses whole batches per shard and keeps an earlier run's choice, so a rerun
     * with another n_workers (say after async mode) keeps the finished shards. */
    runner_job rj = {.name = label, .n_items = m.n, .chunk_multiple = (size_t)o->batch_size, .work_dir = work_dir,
                     .signature = sig, .provide = provide, .release = release, .forward = forward,
                     .item_name = item_name, .arg = &job};
    log_info("infer: %s: %zu utterances, %s (beam_size %d%s), batch_size %d, %zu worker(s) x %d thread(s) each", test,
             m.n, o->s2t.beam_size <= 1 ? "greedy CTC" : "CTC prefix beam search", o->s2t.beam_size,
             o->s2t.penalty != 0 ? ", penalty set" : "", o->batch_size, n_workers, o->threads);
    double t0 = now_seconds();
    int run_rc = runner_run(&rj, icfg->parallel, err);
    if (run_rc == RUNNER_PENDING) { /* SLURM jobs decode it (async mode); a rerun merges */
        rc = 0;
        goto out;
    }
    if (run_rc != 0) goto out;
    double wall = now_seconds() - t0;
    atomic_file hyp;
    if (atomic_open(&hyp, hyp_path, err) != 0) goto out;
    merge_ctx mc = {.m = &m, .hyp = hyp.fp, .err = err};
    if (runner_for_each(&rj, merge_one, &mc, err) != 0) {
        atomic_abort(&hyp);
        goto out;
    }
    if (atomic_commit(&hyp, err) != 0 || write_ref(ref_path, &m, err) != 0) goto out;
    /* Audio seconds from the frame count: frames = samples / hop + 1. */
    const model_cfg *mcfg = model_files_training(mf)->model;
    frontend_opts fo;
    frontend_opts_from_cfg(mcfg ? mcfg->frontend_conf : NULL, &fo);
    double audio = (mc.frames - (double)m.n) * fo.hop_length / fo.fs;
    log_info("infer: %s: %zu utterances, %.1f s of audio in %.2f s (RTF %.4f, %.1f utt/s) -> %s", test, m.n, audio,
             wall, audio > 0 ? wall / audio : 0.0, wall > 0 ? (double)m.n / wall : 0.0, hyp_path);
    rc = 0;
out:
    manifest_free(&m);
    free(manifest_path);
    free(out_dir);
    free(work_dir);
    free(hyp_path);
    free(ref_path);
    free(sig);
    free(label);
    return rc;
}

/* Threads per worker: OMP_NUM_THREADS, else 1. Never derived from n_workers: OpenBLAS rounds
 * differently on other thread counts, and the hypotheses must not depend on n_workers. Use
 * parallel.n_workers (one per core) to use the machine. */
static int worker_threads(void)
{
    const char *omp = getenv("OMP_NUM_THREADS");
    int n = omp ? atoi(omp) : 0;
    return n > 0 ? n : 1;
}

/* Decoding options with ESPnet's meaning; keys this CTC-only model cannot honour are named once. */
static int decode_opts_from_cfg(decode_opts *o, const inference_cfg *icfg, const char *file, esp_err *err)
{
    const infer_model_cfg *mc = icfg->model;
    o->s2t.beam_size = mc->beam_size > 0 ? (int)mc->beam_size : 1;
    if (mc->beam_size < 0 || mc->beam_size > 10000)
        return esp_fail(err, "%s: model.beam_size: %" PRId64 " (use 1 for greedy, up to 10000)", file, mc->beam_size);
    if (mc->batch_size < 0)
        return esp_fail(err, "%s: model.batch_size: %" PRId64 " (use 1 or more)", file, mc->batch_size);
    o->batch_size = mc->batch_size > 0 ? (int)(mc->batch_size < 4096 ? mc->batch_size : 4096) : 1;
    o->s2t.penalty = mc->penalty;
    o->threads = worker_threads();
    if (mc->ctc_weight != 0 && mc->ctc_weight != 1.0)
        log_warn("%s: model.ctc_weight: %g needs an attention decoder, which this CTC model does not have; "
                 "decoding is CTC only (ctc_weight 1.0)", file, mc->ctc_weight);
    if (mc->lm_weight > 0)
        log_warn("%s: model.lm_weight: %g: no language model is supported; ignored", file, mc->lm_weight);
    if (mc->nbest > 1)
        log_warn("%s: model.nbest: %" PRId64 ": only the best hypothesis is written (hyp.scp)", file, mc->nbest);
    esp_err why;
    if (!(o->backend_kind = backend_kind_for(mc->device, &why)))
        return esp_fail(err, "%s: model.device: %s", file, why.msg);
    return 0;
}

int stage_infer(const stage_ctx *ctx, esp_err *err)
{
    const inference_cfg *icfg = ctx->configs->inference->typed;
    const char *file = ctx->configs->inference->path;
    if (!icfg->inference_dir) return esp_fail(err, "%s: inference_dir: missing (set inference_dir)", file);
    if (!icfg->data_dir) return esp_fail(err, "%s: data_dir: missing (the test manifests are under it)", file);
    if (!icfg->test_sets || icfg->n_test_sets == 0)
        return esp_fail(err, "%s: test_sets: missing or empty (list the splits to decode, e.g. [test])", file);
    if (!icfg->model) return esp_fail(err, "%s: model: missing (the template conf/inference.yaml sets it)", file);
    decode_opts o;
    if (decode_opts_from_cfg(&o, icfg, file, err) != 0) return -1;
    model_files mf;
    if (model_files_locate(&mf, icfg, file, err) != 0) return -1;
    log_info("infer: model %s (config %s)", mf.weights, mf.train_config_path);
    int rc = 0;
    for (unsigned i = 0; i < icfg->n_test_sets && rc == 0; i++) rc = decode_set(icfg, &mf, &o, icfg->test_sets[i], err);
    model_files_free(&mf);
    return rc;
}
