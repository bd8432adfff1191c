/* ESPnet's BatchBeamSearchOnline (see beam_search_online.h) on the steps of beam_search_steps.h:
 * forward's block loop and process_one_block. */
#include "core/decode/beam_search_online.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "core/decode/beam_search_steps.h"

struct bs_online {
    bs_online_io io;
    beam_search_opts o;
    int V;
    beam_search *w;
    bs_ctx c;
    int started;          /* running_hyps is not None */
    int no_repeat_check;  /* disable_repetition_detection */
    int n_run, T_run;     /* running hypotheses; the frames their CTC states cover */
    int T_prev;           /* the same for w->prev (w->n_prev of them) */
    int process_idx, processed_block, frames;
    bs_nbest prev_output; /* the last call's result that came from a block (has: it was set) */
    int has_prev_output;
    int *best;            /* bs_online_running's copy */
    size_t cap_best;
};

bs_online *bs_online_new(const bs_online_io *io, const beam_search_opts *o, int V)
{
    bs_online *s = xcalloc(1, sizeof *s);
    s->io = *io, s->o = *o, s->V = V;
    s->w = beam_search_new();
    bs_ctx_init(&s->c, NULL, 0, V, io->att, io->lm, o);
    return s;
}

void bs_online_reset(bs_online *s)
{
    s->started = s->n_run = s->T_run = s->T_prev = 0;
    s->process_idx = s->processed_block = s->frames = 0;
    s->w->n_prev = 0;
    bs_clear_ended(s->w);
    bs_nbest_free(&s->prev_output);
    s->has_prev_output = 0;
}

void bs_online_free(bs_online *s)
{
    if (!s) return;
    bs_online_reset(s);
    beam_search_free(s->w);
    free(s->best);
    free(s);
}

/* CTCPrefixScorer.extend_prob / extend_state: the running hypotheses' states over T frames. */
static void extend(bs_online *s, int T)
{
    beam_search *w = s->w;
    const ctc_prefix_scorer *cp = &s->c.cps;
    if (!s->c.ctc_on) {
        s->T_run = T;
        return;
    }
    for (int i = 0; i < s->n_run; i++) {
        bs_slot *h = &w->run[i];
        if (h->len == 1) { /* the empty prefix's state is None: made afresh over all frames */
            ctc_prefix_init_state(cp, h->r);
            continue;
        }
        for (int t = s->T_run > 1 ? s->T_run : 1; t < T; t++) {
            h->r[2 * t] = CTC_LOGZERO;
            h->r[2 * t + 1] = h->r[2 * (t - 1) + 1] + cp->logp[(size_t)t * s->V + cp->blank];
        }
    }
    s->T_run = T;
}

/* assemble_hyps over the hypotheses of next flagged in local (in beam order), then the ended
 * list: sorted by score, stable, the best nbest copied into out. */
static void assemble(bs_online *s, const unsigned char *local, int k, bs_nbest *out)
{
    beam_search *w = s->w;
    size_t n0 = w->n_ended;
    for (int j = 0; j < k; j++)
        if (local[j]) bs_push_ended(w, &w->next[j]);
    /* Locals come first in ESPnet's list: rotate them before the ended ones. */
    size_t nl = w->n_ended - n0;
    for (size_t q = 0; q < w->n_ended; q++) w->ended[q].order = (int)(q < n0 ? q + nl : q - n0);
    bs_ended *keep = xmalloc((w->n_ended + 1) * sizeof *keep);
    if (w->n_ended) memcpy(keep, w->ended, w->n_ended * sizeof *keep); /* none yet: w->ended may be NULL */
    for (size_t q = 0; q < n0; q++) { /* the ended list stays: copy its ids */
        int *ids = xmalloc(((size_t)keep[q].h.n_ids + 1) * sizeof *ids);
        memcpy(ids, keep[q].h.ids, (size_t)keep[q].h.n_ids * sizeof *ids);
        keep[q].h.ids = ids;
    }
    bs_take_nbest(w, s->o.nbest, out);
    if (n0) memcpy(w->ended, keep, n0 * sizeof *keep);
    for (size_t q = 0; q < n0; q++) w->ended[q].order = (int)q;
    w->n_ended = n0;
    free(keep);
}

/* The ended list's n-best into out, the list kept. */
static void ended_nbest(bs_online *s, bs_nbest *out) { assemble(s, NULL, 0, out); }

/* process_one_block over the first T frames; out gets its result. */
static void process_block(bs_online *s, int T, int is_final, double maxlenratio, bs_nbest *out)
{
    beam_search *w = s->w;
    bs_ctx *c = &s->c;
    c->cps.T = T;
    bs_reserve(w, (size_t)s->o.beam_size, (size_t)c->maxlen + 2, (size_t)T, (size_t)s->V, (size_t)c->pre_beam);
    extend(s, T);
    unsigned char *local = xcalloc((size_t)s->o.beam_size + 1, 1);
    int k = 0, eos = c->cps.eos;
    while (s->process_idx < c->maxlen) {
        int i = s->process_idx, last = i == c->maxlen - 1;
        k = bs_search_step(w, c, s->n_run, last);
        if (last) { /* every hypothesis ends here (see the header) */
            s->n_run = bs_post_process(w, c, k, i);
            memset(local, 0, (size_t)k);
            break;
        }
        int n_local = 0, repeat = 0;
        for (int j = 0; j < k; j++) {
            const bs_slot *h = &w->next[j];
            local[j] = h->yseq[h->len - 1] == eos;
            n_local += local[j];
            if (local[j] || repeat || is_final || s->no_repeat_check) continue;
            for (int q = 0; q < h->len - 1 && !repeat; q++) repeat = h->yseq[q] == h->yseq[h->len - 1];
        }
        if (repeat) break; /* with the hypotheses that ended at this step */
        if (is_final && maxlenratio == 0.0 && bs_end_detect(w, i)) break;
        if (n_local > 0 && !is_final) break;
        /* prev_hyps = running_hyps; running_hyps = post_process(best) */
        bs_slot *t = w->prev;
        w->prev = w->run, w->run = t;
        w->n_prev = s->n_run, s->T_prev = s->T_run;
        s->n_run = bs_post_process(w, c, k, i);
        if (is_final)
            for (int j = 0; j < k; j++)
                if (local[j]) bs_push_ended(w, &w->next[j]);
        memset(local, 0, (size_t)k);
        if (s->n_run == 0) break;
        s->process_idx++;
    }
    if (is_final) {
        ended_nbest(s, out);
    } else {
        assemble(s, local, k, out);
        if (s->process_idx > 1 && w->n_prev > 0) { /* back one step */
            bs_slot *t = w->run;
            w->run = w->prev, w->prev = t;
            s->n_run = w->n_prev, s->T_run = s->T_prev;
            s->process_idx--;
            w->n_prev = 0;
        }
    }
    free(local);
}

static void copy_nbest(bs_nbest *dst, const bs_nbest *src)
{
    dst->n = src->n;
    dst->hyps = xcalloc((size_t)src->n + 1, sizeof *dst->hyps);
    for (int k = 0; k < src->n; k++) {
        dst->hyps[k] = src->hyps[k];
        dst->hyps[k].ids = xmalloc(((size_t)src->hyps[k].n_ids + 1) * sizeof(int));
        memcpy(dst->hyps[k].ids, src->hyps[k].ids, (size_t)src->hyps[k].n_ids * sizeof(int));
    }
}

int bs_online_push(bs_online *s, const float *ctc_logp, int T, int is_final, bs_nbest *out)
{
    ESP_CHECK(T >= 0 && (!s->c.ctc_on || ctc_logp || T == 0));
    *out = (bs_nbest){0};
    bs_ctx *c = &s->c;
    c->cps.logp = ctc_logp;
    c->maxlen = beam_search_maxlen(s->o.maxlenratio, T);
    c->minlen = s->o.minlenratio < 0 ? (int)(-s->o.minlenratio) : (int)(s->o.minlenratio * T);
    int blocks = 0, done = 0;
    bs_nbest ret = {0};
    for (;;) {
        int end = BS_ONLINE_BLOCK - BS_ONLINE_LOOK_AHEAD + BS_ONLINE_HOP * s->processed_block, h = end, last = 0;
        if (end >= T) {
            if (!is_final) break;
            h = T, last = 1;
        }
        c->cps.T = h;
        if (!s->started) {
            bs_reserve(s->w, (size_t)s->o.beam_size, (size_t)c->maxlen + 2, (size_t)h, (size_t)s->V,
                       (size_t)c->pre_beam);
            bs_start(s->w, c);
            s->started = 1, s->n_run = 1, s->T_run = h;
        }
        if (s->io.source) s->io.source(s->io.ctx, h, s->processed_block == 0);
        bs_nbest_free(&ret);
        process_block(s, h, last, s->o.maxlenratio, &ret);
        s->processed_block++, blocks++;
        s->frames = h;
        if (last) {
            done = 1;
            break;
        }
    }
    if (done) {
        *out = ret;
        bs_online_reset(s);
    } else if (blocks == 0) {
        if (s->has_prev_output) copy_nbest(out, &s->prev_output);
        bs_nbest_free(&ret);
    } else {
        bs_nbest_free(&s->prev_output);
        copy_nbest(&s->prev_output, &ret);
        s->has_prev_output = 1;
        *out = ret;
    }
    return blocks;
}

int bs_online_running(bs_online *s, const int **ids)
{
    *ids = NULL;
    if (!s->started || s->n_run == 0) return 0;
    const bs_slot *h = &s->w->run[0];
    if ((size_t)h->len > s->cap_best) {
        s->cap_best = (size_t)h->len;
        s->best = xrealloc(s->best, s->cap_best * sizeof *s->best);
    }
    memcpy(s->best, h->yseq + 1, (size_t)(h->len - 1) * sizeof *s->best);
    *ids = s->best;
    return h->len - 1;
}

int bs_online_frames(const bs_online *s) { return s->frames; }

void bs_online_set_repetition_check(bs_online *s, int on) { s->no_repeat_check = !on; }
