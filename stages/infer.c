/* Stage 6 infer (alias decode): decodes every test set of the inference config with the trained
 * model, through the runner (parallel:), and writes ESPnet3's ${inference_dir}/<test>/hyp.scp and
 * ref.scp (`utt_id text`, manifest order); with model.nbest > 1 also ESPnet2's n-best layout
 * (espnet2/bin/asr_inference.py): <test>/{n}best_recog/text, token, token_int and score for
 * n = 1..nbest, `utt_id value` lines, an utterance listed in as many as it has hypotheses. With
 * write_ctm also <test>/hyp.ctm (stages/infer_ctm.h): the best hypothesis's words, timed. An item
 * longer than longform.threshold seconds is decoded in windows (core/decode/longform.h).
 *
 * The decoding itself is core/decode/speech2text.h; this stage turns the config into its options,
 * creates the backend, and runs the test set through the runner: each worker's provider opens the
 * decoder once and decodes batch_size utterances at once (speech2text_decode_spans: one padded
 * encoder pass and one joint search over the batch; long-form items on their own), the first
 * runner call of a batch decoding all of it (shards are whole batch_size batches, so a rerun with
 * the same batch_size keeps finished shards). Each worker computes on the same number of threads
 * whatever n_workers is (1, or OMP_NUM_THREADS), so hyp.scp is byte-identical for any n_workers;
 * for any batch_size the hypotheses are the same (speech2text.h: scores may differ in their last
 * bits). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend_profile.h"
#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/base/progress.h"
#include "core/compute/backend.h"
#include "core/data/frontend.h"
#include "core/data/audio_stream.h"
#include "core/decode/longform.h"
#include "core/decode/s2t_config.h"
#include "core/decode/speech2text.h"
#include "core/decode/words.h"
#include "core/formats/manifest.h"
#include "core/data/dataset_src.h"
#include "core/nn/decoder_conf.h"
#include "core/nn/model_files.h"
#include "core/runner/runner.h"
#include "stages/infer_ctm.h"
#include "stages/infer_output.h"
#include "stages/stages.h"

typedef struct decode_opts {
    s2t_opts s2t;
    longform_opts lf;
    int longform;             /* items longer than lf_threshold seconds are decoded in windows */
    double lf_threshold;
    int write_ctm;            /* the records carry the best hypothesis's words, for hyp.ctm */
    int batch_size;
    int threads;              /* per worker */
    backend_kind backend;     /* from model.device (the stage context's); a GPU worker sees its device as 0 */
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
    size_t single_until; /* items below it (of a batch that failed) are decoded one by one */
    runner_buf *results;
} infer_env;

static void release(void *p)
{
    infer_env *env = p;
    if (!env) return;
    for (size_t i = env->lo; i < env->hi; i++) runner_buf_free(&env->results[i - env->lo]);
    free(env->results);
    speech2text_close(env->s2t); /* before the backend it borrows */
    if (env->be && env->be->profile) {
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        backend_profile_report(env->be, "infer, one worker", mem);
        fclose(mem);
        log_info("infer: per-op profile (ESPNET3_PROFILE):\n%s", text);
        free(text);
    }
    backend_close(env->be);
    free(env);
}

/* Builds a decoder from the files alone: backend, then model, weights and features. */
static void *provide(void *arg, esp_err *err)
{
    const infer_job *job = arg;
    infer_env *env = xcalloc(1, sizeof *env);
    env->job = job;
    if (!(env->be = backend_open(job->opts.backend, 0, job->opts.threads, err))) goto fail;
    if (backend_profile_requested()) backend_profile_start(env->be);
    env->s2t = speech2text_open(env->be, job->mf, &job->opts.s2t, err);
    if (!env->s2t) goto fail;
    if (job->opts.longform && longform_check(env->s2t, &job->opts.lf, err) != 0) goto fail;
    env->results = xcalloc((size_t)job->opts.batch_size, sizeof *env->results);
    return env;
fail:
    release(env);
    return NULL;
}

static const char *item_name(size_t idx, void *arg) { return ((infer_job *)arg)->m->items[idx].utt; }

/* Appends a u32 length and the bytes. */
static void put_str(runner_buf *out, const char *p, size_t n)
{
    uint32_t len = (uint32_t)n;
    runner_buf_append(out, &len, sizeof len);
    runner_buf_append(out, p, n);
}

/* One hypothesis of a result record: f64 score, u32 count + i32 ids, text, tokens (space-joined). */
static void put_hyp(runner_buf *out, const s2t_hyp *h, const token_list *tl)
{
    uint32_t n = (uint32_t)h->n_ids;
    runner_buf_append(out, &h->score, sizeof h->score);
    runner_buf_append(out, &n, sizeof n);
    for (uint32_t k = 0; k < n; k++) {
        int32_t id = h->ids[k];
        runner_buf_append(out, &id, sizeof id);
    }
    put_str(out, h->text, strlen(h->text));
    runner_buf tok = {0};
    for (uint32_t k = 0; k < n; k++) runner_buf_printf(&tok, "%s%s", k ? " " : "", tl->tokens[h->ids[k]]);
    put_str(out, (const char *)tok.data, tok.len);
    runner_buf_free(&tok);
}

/* Whether the item is long-form's: its span (or, without one, its file's header) is longer than
 * the threshold. */
static int is_long(const infer_env *env, const manifest_entry *e, int *yes, esp_err *err)
{
    const decode_opts *o = &env->job->opts;
    *yes = 0;
    if (!o->longform) return 0;
    if (e->end > 0 && e->end != 1e300) {
        *yes = e->end - e->start > o->lf_threshold;
        return 0;
    }
    const frontend_opts *fo = speech2text_frontend(env->s2t);
    audio_stream *st = audio_stream_open(e->wav, fo->fs, "model.frontend_conf.fs", o->s2t.resample, e->start, e->end,
                                         err);
    if (!st) return -1;
    *yes = audio_stream_seconds(st) > o->lf_threshold;
    audio_stream_close(st);
    return 0;
}

/* Items [lo, lo + n) into h (zeroed): long-form ones one at a time, the others as one batch over
 * their spans. On an error h is left empty. */
static int decode_items(infer_env *env, size_t lo, int n, s2t_hyp *h, esp_err *err)
{
    const char **paths = xmalloc((size_t)n * sizeof *paths);
    double *starts = xmalloc((size_t)n * sizeof *starts), *ends = xmalloc((size_t)n * sizeof *ends);
    int *at = xmalloc((size_t)n * sizeof *at), k = 0, rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const manifest_entry *e = &env->job->m->items[lo + (size_t)i];
        int lng;
        rc = is_long(env, e, &lng, err);
        if (rc == 0 && lng && !env->job->opts.s2t.timestamps)
            rc = esp_fail(err, "%s: longer than longform.threshold (%g s), and windows are merged by word times, "
                          "which come from a CTC branch the model does not have (set longform.enabled: false to "
                          "decode it whole)", e->wav, env->job->opts.lf_threshold);
        else if (rc == 0 && lng)
            rc = longform_decode(env->s2t, e->wav, e->start, e->end, &env->job->opts.lf, &h[i], err);
        else if (rc == 0)
            paths[k] = e->wav, starts[k] = e->start, ends[k] = e->end, at[k++] = i;
    }
    s2t_hyp *bh = xcalloc((size_t)k + 1, sizeof *bh);
    if (rc == 0 && k > 0 && (rc = speech2text_decode_spans(env->s2t, paths, starts, ends, k, bh, err)) == 0)
        for (int j = 0; j < k; j++) h[at[j]] = bh[j];
    if (rc != 0)
        for (int i = 0; i < n; i++) s2t_hyp_free(&h[i]);
    free(paths), free(starts), free(ends), free(at), free(bh);
    return rc;
}

/* The best hypothesis's words (timestamps): u32 count, then each: f64 start, end, score, text. */
static void put_words(runner_buf *out, const speech2text *s, const s2t_hyp *h)
{
    s2t_word *w;
    size_t n;
    esp_err err;
    if (s2t_hyp_words(s, h, &w, &n, &err) != 0) esp_die("infer: %s", err.msg); /* timestamps were on */
    uint32_t nw = (uint32_t)n;
    runner_buf_append(out, &nw, sizeof nw);
    for (size_t i = 0; i < n; i++) {
        double t[3] = {w[i].start, w[i].end, w[i].score};
        runner_buf_append(out, t, sizeof t);
        put_str(out, w[i].text, strlen(w[i].text));
    }
    s2t_words_free(w, n);
}

/* Result record of one utterance: u32 feature frames, u32 hypotheses found, then each (put_hyp),
 * then with write_ctm the best one's words (put_words). */
static int decode_batch(infer_env *env, size_t lo, size_t hi, esp_err *err)
{
    for (size_t i = env->lo; i < env->hi; i++) runner_buf_free(&env->results[i - env->lo]);
    env->lo = env->hi = 0;
    int n = (int)(hi - lo);
    s2t_hyp *hyps = xcalloc((size_t)n, sizeof *hyps);
    int rc = decode_items(env, lo, n, hyps, err);
    const token_list *tl = speech2text_tokens(env->s2t);
    for (int i = 0; i < n && rc == 0; i++) {
        uint32_t head[2] = {(uint32_t)hyps[i].frames, (uint32_t)hyps[i].n_found};
        runner_buf *out = &env->results[i];
        out->len = 0;
        runner_buf_append(out, head, sizeof head);
        for (int k = 0; k < hyps[i].n_found; k++) put_hyp(out, k == 0 ? &hyps[i] : &hyps[i].alt[k - 1], tl);
        if (env->job->opts.write_ctm) put_words(out, env->s2t, &hyps[i]);
        s2t_hyp_free(&hyps[i]);
    }
    free(hyps);
    if (rc != 0) return -1;
    env->lo = lo, env->hi = hi;
    return 0;
}

/* The first call of a batch (items [b, b + batch_size) from a multiple b of batch_size, as the
 * shards are cut) decodes all of it; the others take their records. A batch that fails (an
 * unreadable file) is decoded item by item instead, so that the call that fails is its own item's,
 * which the runner names. */
static int forward(size_t idx, void *p, runner_buf *out, esp_err *err)
{
    infer_env *env = p;
    if (idx < env->lo || idx >= env->hi) {
        size_t bs = (size_t)env->job->opts.batch_size, end = idx - idx % bs + bs;
        if (end > env->job->m->n) end = env->job->m->n;
        if (idx < env->single_until || decode_batch(env, idx, end, err) != 0) {
            env->single_until = end;
            if (decode_batch(env, idx, idx + 1, err) != 0) return -1;
        }
    }
    const runner_buf *r = &env->results[idx - env->lo];
    runner_buf_append(out, r->data, r->len);
    return 0;
}

/* The n-best files of one rank n: {n}best_recog/text, token, token_int, score. */
enum { NB_TEXT, NB_TOKEN, NB_TOKEN_INT, NB_SCORE, NB_FILES };
static const char *const nb_names[NB_FILES] = {"text", "token", "token_int", "score"};

typedef struct merge_ctx {
    const manifest *m;
    FILE *hyp;
    int nbest;            /* > 1: n-best files are filled */
    runner_buf *nb;       /* nbest x NB_FILES contents */
    ctm_lines *ctm;       /* write_ctm: the words, timed */
    double frames;
    esp_err *err;
} merge_ctx;

/* A reader over one result record; every read checks the bounds. */
typedef struct rec_reader {
    const unsigned char *p, *end;
} rec_reader;

static int rd(rec_reader *r, void *dst, size_t n)
{
    if ((size_t)(r->end - r->p) < n) return -1;
    memcpy(dst, r->p, n);
    r->p += n;
    return 0;
}

static int rd_str(rec_reader *r, const char **s, uint32_t *len)
{
    if (rd(r, len, sizeof *len) != 0 || (size_t)(r->end - r->p) < *len) return -1;
    *s = (const char *)r->p;
    r->p += *len;
    return 0;
}

/* Reads hypothesis k of a record: hyp.scp gets the best text, rank k + 1's n-best files the rest. */
static int merge_hyp(merge_ctx *c, rec_reader *r, const char *utt, int k)
{
    double score;
    uint32_t n, tlen, klen;
    const char *text, *tok;
    if (rd(r, &score, sizeof score) != 0 || rd(r, &n, sizeof n) != 0) return -1;
    const unsigned char *ids = r->p;
    if ((size_t)(r->end - r->p) / sizeof(int32_t) < n) return -1;
    r->p += (size_t)n * sizeof(int32_t);
    if (rd_str(r, &text, &tlen) != 0 || rd_str(r, &tok, &klen) != 0) return -1;
    if (k == 0) fprintf(c->hyp, "%s %.*s\n", utt, (int)tlen, text);
    if (c->nbest <= 1 || k >= c->nbest) return 0;
    runner_buf *f = c->nb + (size_t)k * NB_FILES;
    runner_buf_printf(&f[NB_TEXT], "%s %.*s\n", utt, (int)tlen, text);
    runner_buf_printf(&f[NB_TOKEN], "%s %.*s\n", utt, (int)klen, tok);
    runner_buf_printf(&f[NB_TOKEN_INT], "%s", utt);
    for (uint32_t j = 0; j < n; j++) {
        int32_t id;
        memcpy(&id, ids + (size_t)j * sizeof id, sizeof id);
        runner_buf_printf(&f[NB_TOKEN_INT], " %d", (int)id);
    }
    runner_buf_printf(&f[NB_TOKEN_INT], "%s\n", n ? "" : " ");
    runner_buf_printf(&f[NB_SCORE], "%s %.9g\n", utt, score);
    return 0;
}

/* The words of a record (put_words) into the CTM lines of their recording. */
static int merge_words(merge_ctx *c, rec_reader *r, const manifest_entry *e)
{
    uint32_t n, len;
    if (rd(r, &n, sizeof n) != 0) return -1;
    for (uint32_t i = 0; i < n; i++) {
        double t[3];
        const char *text;
        if (rd(r, t, sizeof t) != 0 || rd_str(r, &text, &len) != 0) return -1;
        ctm_add(c->ctm, e, t[0], t[1], t[2], text, len);
    }
    return 0;
}

static int merge_one(size_t idx, const void *data, size_t len, void *p)
{
    merge_ctx *c = p;
    const char *utt = c->m->items[idx].utt;
    rec_reader r = {data, (const unsigned char *)data + len};
    uint32_t head[2];
    if (rd(&r, head, sizeof head) != 0) return esp_fail(c->err, "infer: result of %s is truncated", utt);
    c->frames += head[0];
    if (head[1] == 0) fprintf(c->hyp, "%s \n", utt); /* the search ended no hypothesis */
    for (uint32_t k = 0; k < head[1]; k++)
        if (merge_hyp(c, &r, utt, (int)k) != 0) return esp_fail(c->err, "infer: result of %s is truncated", utt);
    if (c->ctm && merge_words(c, &r, &c->m->items[idx]) != 0)
        return esp_fail(c->err, "infer: result of %s is truncated", utt);
    return 0;
}

/* Writes <out_dir>/{n}best_recog/<file> for n = 1..nbest. */
static int write_nbest(const char *out_dir, const merge_ctx *c, esp_err *err)
{
    int rc = 0;
    for (int k = 0; k < c->nbest && rc == 0; k++) {
        char *dir = xasprintf("%s/%dbest_recog", out_dir, k + 1);
        rc = mkdir_p(dir, err);
        for (int f = 0; f < NB_FILES && rc == 0; f++) {
            char *path = xasprintf("%s/%s", dir, nb_names[f]);
            const runner_buf *b = &c->nb[(size_t)k * NB_FILES + (size_t)f];
            rc = atomic_write_file(path, b->data ? (const void *)b->data : "", b->len, err);
            free(path);
        }
        free(dir);
    }
    return rc;
}

static int write_ref(const char *path, const manifest *m, esp_err *err)
{
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) return -1;
    for (size_t i = 0; i < m->n; i++) fprintf(af.fp, "%s %s\n", m->items[i].utt, m->items[i].text);
    return atomic_commit(&af, err);
}

/* hyp.scp (and with nbest > 1 the n-best files) from the runner's results; *frames gets their sum. */
static int merge_results(const runner_job *rj, const manifest *m, const char *out_dir, int nbest, int ctm,
                         double *frames, esp_err *err)
{
    char *hyp_path = xasprintf("%s/hyp.scp", out_dir);
    atomic_file hyp;
    int rc = atomic_open(&hyp, hyp_path, err);
    free(hyp_path);
    if (rc != 0) return -1;
    merge_ctx mc = {.m = m, .hyp = hyp.fp, .nbest = nbest, .err = err};
    if (nbest > 1) mc.nb = xcalloc((size_t)nbest * NB_FILES, sizeof *mc.nb);
    if (ctm) mc.ctm = ctm_lines_new();
    rc = runner_for_each(rj, merge_one, &mc, err);
    if (rc != 0) atomic_abort(&hyp);
    else rc = atomic_commit(&hyp, err);
    if (rc == 0 && nbest > 1) rc = write_nbest(out_dir, &mc, err);
    if (rc == 0 && ctm) {
        char *ctm_path = xasprintf("%s/hyp.ctm", out_dir);
        rc = ctm_write(mc.ctm, ctm_path, err);
        free(ctm_path);
    }
    ctm_lines_free(mc.ctm);
    for (size_t k = 0; mc.nb && k < (size_t)nbest * NB_FILES; k++) runner_buf_free(&mc.nb[k]);
    free(mc.nb);
    *frames = mc.frames;
    return rc;
}

/* ESPnet3's Inference API (espnet3.systems.esp2_asr.inference.Inference) names its output `text`:
 * its runner writes <test>/text.scp, which the esp2_asr metrics read (hyp_key: text). */
static int writes_text_scp(const inference_cfg *icfg)
{
    return icfg->model && icfg->model->target && !strcmp(icfg->model->target, "espnet3.systems.esp2_asr.inference.Inference");
}

static int copy_hyp_to_text(const char *out_dir, esp_err *err)
{
    char *hyp = xasprintf("%s/hyp.scp", out_dir), *text = xasprintf("%s/text.scp", out_dir);
    size_t len;
    char *bytes = read_file(hyp, READ_LIST, &len, err);
    int rc = bytes ? atomic_write_file(text, bytes, len, err) : -1;
    free(bytes), free(hyp), free(text);
    return rc;
}

static const char *search_name(const s2t_opts *o)
{
    if (o->lm_weight > 0) return o->ctc_weight < 1.0 ? "joint CTC/attention beam search with LM fusion"
                                                     : "CTC label-synchronous beam search with LM fusion";
    if (o->ctc_weight < 1.0) return "joint CTC/attention beam search";
    return o->beam_size <= 1 ? "greedy CTC" : "CTC prefix beam search";
}

static uint64_t hash_file(uint64_t h, const char *path, esp_err *err, int *failed)
{
    size_t len;
    char *text = read_file(path, READ_MODEL, &len, err);
    if (!text) {
        *failed = 1;
        return h;
    }
    h = fnv1a64_bytes(h, text, len);
    free(text);
    return h;
}

static int decode_set(const esp_config *inference, const model_files *mf, const decode_opts *o, const char *test,
                      esp_err *err)
{
    const inference_cfg *icfg = inference->typed;
    char *manifest_path = NULL;
    char *out_dir = xasprintf("%s/%s", icfg->inference_dir, test);
    char *work_dir = xasprintf("%s/.runner", out_dir);
    char *ref_path = xasprintf("%s/ref.scp", out_dir);
    manifest m = {0};
    char *sig = NULL, *label = NULL;
    int rc = -1;
    if (dataset_test_load(icfg, test, dataset_frontend_fs(model_files_training(mf)), &m, &manifest_path, err) != 0 ||
        mkdir_p(out_dir, err) != 0)
        goto out;
    if (m.n == 0) {
        esp_fail(err, "%s: test set '%s' has no utterances", manifest_path, test);
        goto out;
    }
    /* Same inputs, model and search = same job: a rerun reuses finished shards. batch_size is left
     * out on purpose (it does not change results), but it sets the shard size. */
    int failed = 0;
    uint64_t h = FNV1A64_INIT;
    for (size_t i = 0; i < m.n; i++) {
        h = fnv1a64_bytes(h, m.items[i].utt, strlen(m.items[i].utt) + 1);
        h = fnv1a64_bytes(h, m.items[i].wav, strlen(m.items[i].wav) + 1);
        h = fnv1a64_bytes(h, m.items[i].text, strlen(m.items[i].text) + 1);
        if (m.items[i].end > 0)
            h = fnv1a64_bytes(fnv1a64_bytes(h, &m.items[i].start, sizeof m.items[i].start), &m.items[i].end,
                              sizeof m.items[i].end);
    }
    h = hash_file(h, mf->weights, err, &failed);
    h = hash_file(h, mf->tokens, err, &failed);
    if (mf->stats) h = hash_file(h, mf->stats, err, &failed);
    h = hash_file(h, mf->train_config_path, err, &failed);
    /* The text of a hypothesis also depends on how tokens become text (token_type, bpemodel). */
    if (mf->bpemodel) h = hash_file(h, mf->bpemodel, err, &failed);
    h = fnv1a64_bytes(h, &mf->token_type, sizeof mf->token_type);
    const model_files *lm = o->s2t.lm_weight > 0 ? o->s2t.lm : NULL;
    if (lm) {
        h = hash_file(h, lm->weights, err, &failed);
        h = hash_file(h, lm->train_config_path, err, &failed);
    }
    if (failed) goto out;
    /* "infer2": results are n-best records since the joint search (older shards do not match). */
    const s2t_opts *so = &o->s2t;
    sig = xasprintf("infer2 %016" PRIx64 " beam %d penalty %.17g ctc_weight %.17g nbest %d maxlenratio %.17g "
                    "minlenratio %.17g%s lm_weight %.17g%s", h, so->beam_size, so->penalty, so->ctc_weight, so->nbest,
                    so->maxlenratio, so->minlenratio, so->resample ? " resample" : "", lm ? so->lm_weight : 0.0,
                    o->write_ctm ? " words" : "");
    if (o->longform) { /* long items decode in windows: their settings change those items' results */
        char *lf = xasprintf("%s longform window %.17g overlap %.17g threshold %.17g", sig, o->lf.window,
                             o->lf.overlap, o->lf_threshold);
        free(sig);
        sig = lf;
    }
    infer_job job = {.mf = mf, .m = &m, .opts = *o};
    int n_workers;
    if (runner_workers(icfg->parallel, &n_workers, err) != 0) goto out;
    label = xasprintf("infer %s", test);
    /* The runner chooses whole batches per shard and keeps an earlier run's choice, so a rerun
     * with another n_workers (say after async mode) keeps the finished shards. */
    runner_job rj = {.name = label, .n_items = m.n, .chunk_multiple = (size_t)o->batch_size, .work_dir = work_dir,
                     .signature = sig, .provide = provide, .release = release, .forward = forward,
                     .item_name = item_name, .arg = &job};
    log_info("infer: %s: %zu utterances, %s (beam_size %d%s, nbest %d), batch_size %d, %d worker(s) x %d thread(s) "
             "each", test, m.n, search_name(so), so->beam_size, so->penalty != 0 ? ", penalty set" : "", so->nbest,
             o->batch_size, n_workers, o->threads);
    if (o->longform)
        log_info("infer: %s: items longer than %g s decode in %g s windows overlapping by %g s (longform:)", test,
                 o->lf_threshold, o->lf.window, o->lf.overlap);
    double t0 = now_seconds();
    int run_rc = runner_run(&rj, icfg->parallel, err);
    if (run_rc == RUNNER_PENDING) { /* SLURM jobs decode it (async mode); a rerun merges */
        rc = 0;
        goto out;
    }
    if (run_rc != 0) goto out;
    double wall = now_seconds() - t0, frames;
    if (merge_results(&rj, &m, out_dir, so->nbest, o->write_ctm, &frames, err) != 0 || write_ref(ref_path, &m, err) != 0) goto out;
    if (writes_text_scp(icfg) && copy_hyp_to_text(out_dir, err) != 0) goto out;
    if (infer_output_fn(inference, out_dir, err) != 0) goto out;
    /* Audio seconds from the frame count: frames = samples / hop + 1. */
    const model_cfg *mcfg = model_files_training(mf)->model;
    frontend_opts fo;
    frontend_opts_from_cfg(mcfg ? mcfg->frontend_conf : NULL, &fo);
    double audio = (frames - (double)m.n) * fo.hop_length / fo.fs;
    log_info("infer: %s: %zu utterances, %.1f s of audio in %.2f s (RTF %.4f, %.1f utt/s) -> %s", test, m.n, audio,
             wall, audio > 0 ? wall / audio : 0.0, wall > 0 ? (double)m.n / wall : 0.0, out_dir);
    rc = 0;
out:
    manifest_free(&m);
    free(manifest_path);
    free(out_dir);
    free(work_dir);
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

/* Decoding options with ESPnet's meaning (core/decode/s2t_config.h), and the runner's batch size. */
static int decode_opts_from_cfg(decode_opts *o, const inference_cfg *icfg, const char *file, esp_err *err)
{
    const infer_model_cfg *mc = icfg->model;
    memset(o, 0, sizeof *o);
    s2t_opts_from_cfg(&o->s2t, icfg, file);
    o->batch_size = (int)mc->batch_size; /* with ESPnet3's top-level form: defaulted and ranged at load */
    if (icfg->output_fn && writes_text_scp(icfg))
        return esp_fail(err, "%s: output_fn: %s with model._target_ espnet3.systems.esp2_asr.inference.Inference (the "
                        "Inference API says what it outputs, `text`: leave output_fn out, as ESPnet3 requires)", file,
                        icfg->output_fn);
    o->write_ctm = icfg->write_ctm;
    o->s2t.timestamps = icfg->write_ctm;
    o->threads = worker_threads();
    longform_opts_from_cfg(&o->lf, &o->lf_threshold, icfg);
    o->longform = isfinite(o->lf_threshold) && !o->s2t.streaming; /* streaming: any length, chunk by chunk */
    return 0;
}

int stage_infer(const stage_ctx *ctx, esp_err *err)
{
    const inference_cfg *icfg = ctx->configs->inference->typed;
    const char *file = ctx->configs->inference->path;
    if (!icfg->inference_dir) return esp_fail(err, "%s: inference_dir: missing (set inference_dir)", file);
    if (!icfg->data_dir) return esp_fail(err, "%s: data_dir: missing (the test manifests are under it)", file);
    const char *tests[256];
    unsigned n_tests = dataset_test_names(icfg->dataset, icfg->test_sets, icfg->n_test_sets, tests, 256);
    if (n_tests == 0)
        return esp_fail(err, "%s: test_sets: missing or empty (list the splits to decode, e.g. [test], or give "
                        "dataset.test entries)", file);
    for (unsigned i = 0; i < n_tests; i++)
        if (!tests[i][0] || strchr(tests[i], '/') || !strcmp(tests[i], ".") || !strcmp(tests[i], ".."))
            return esp_fail(err, "%s: test set name '%s' is not a folder name (it becomes ${inference_dir}/<name>/)",
                            file, tests[i]);
    if (!icfg->model) return esp_fail(err, "%s: model: missing (the template conf/inference.yaml sets it)", file);
    decode_opts o;
    if (decode_opts_from_cfg(&o, icfg, file, err) != 0) return -1;
    o.backend = ctx->backend;
    model_files mf, lmf = {0};
    if (model_files_locate(&mf, icfg, file, err) != 0) return -1;
    if (o.s2t.lm_weight > 0) {
        if (lm_files_locate(&lmf, icfg, file, err) != 0) {
            model_files_free(&mf);
            return -1;
        }
        o.s2t.lm = &lmf;
    }
    /* Before any worker starts: a joint search needs the model's attention decoder. */
    esp_err why;
    if (speech2text_check(&mf, &o.s2t, &why) != 0) {
        model_files_free(&mf), model_files_free(&lmf);
        return esp_fail(err, "%s: model.%s", file, why.msg);
    }
    /* The merge of windows goes by the tokens' times, which need the CTC branch (without one a
     * long item is an error when it comes). */
    if (o.longform && ctc_times_in_cfg(model_files_training(&mf)->model)) o.s2t.timestamps = 1;
    log_info("infer: model %s (config %s)", mf.weights, mf.train_config_path);
    if (o.s2t.lm) log_info("infer: LM %s (config %s), lm_weight %g", lmf.weights, lmf.train_config_path, o.s2t.lm_weight);
    int rc = 0;
    for (unsigned i = 0; i < n_tests && rc == 0; i++) rc = decode_set(ctx->configs->inference, &mf, &o, tests[i], err);
    model_files_free(&mf), model_files_free(&lmf);
    return rc;
}
