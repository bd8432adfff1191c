/* The ASR task's transducer against the real ESPnet2 (fixtures by
 * scripts/make_transducer_fixtures.py): ESPnetASRModel with a 2-block TransformerEncoder, a
 * 2-layer TransducerDecoder and its JointNetwork, a padded batch of 2, dropout off, ctc_weight 0.3.
 * Loss, loss_ctc, loss_transducer and every parameter gradient on the CPU backend and on ref64,
 * with the joint whole and in chunks of frames; ctc_weight 0 (no CTC branch) from the same numbers.
 * The same model with rnn_type gru (packs gru_weights, gru_ctc03): the losses and the decoder's and
 * the joint network's gradients, on both backends. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/nn/model.h"
#include "core/nn/transducer.h"
#include "test/unit/nn/fx_pack.h"
#include "test/unit/test_util.h"

static pack load(const char *name) { return load_pack("transducer", name); }

static model_dims fixture_dims(int no_ctc, int gru)
{
    model_dims d = {.idim = 80, .d = 32, .heads = 4, .ff = 64, .blocks = 2, .vocab = 12, .no_ctc = no_ctc,
                    .tr_layers = 2, .tr_hidden = 24, .tr_joint = 20, .tr_gru = gru};
    d.f2 = ((d.idim - 1) / 2 - 1) / 2;
    return d;
}

/* Copies the fixture's weights in by name, those of `over` (NULL: none) instead of w's; every
 * parameter must be found once (with `exact`, every fixture tensor must be a parameter). */
static void load_weights(asr_model *m, const pack *w, const pack *over, int exact)
{
    size_t used = 0;
    float *host = calloc(m->table.state_total, sizeof *host);
    for (size_t i = 0; i < w->n + (over ? over->n : 0); i++) {
        const pack *src = i < w->n ? w : over;
        size_t k = i < w->n ? i : i - w->n;
        if (src == w && over && pack_get(over, w->names[i], NULL)) continue;
        const param_info *p = param_find(&m->table, src->names[k]);
        if (!p) {
            cr_assert_not(exact, "ESPnet2's %s is not a parameter of espnet3's model", src->names[k]);
            continue;
        }
        cr_assert_eq(src->count[k], p->count, "%s", p->name);
        memcpy(host + p->offset, src->data + src->off[k], p->count * sizeof(float));
        used++;
    }
    cr_assert_eq(used, m->table.n, "the fixture has %zu of espnet3's %zu parameters", used, m->table.n);
    asr_model_state_from_host(m, host);
    free(host);
}

typedef struct batch_in {
    float *feats;
    int lens[2], ylens[2], labels[2 * 7], stride, T;
} batch_in;

static batch_in load_batch(const pack *c)
{
    batch_in b = {0};
    size_t nf, n, ny;
    const float *f = pack_must(c, "in.feats", &nf), *l = pack_must(c, "in.lens", &n), *y = pack_must(c, "in.ys", &ny),
                *yl = pack_must(c, "in.ylens", &n);
    b.feats = malloc(nf * sizeof(float));
    memcpy(b.feats, f, nf * sizeof(float));
    b.T = (int)(nf / 2 / 80);
    b.stride = (int)(ny / 2);
    cr_assert_eq(b.stride, 7);
    for (int i = 0; i < 2; i++) b.lens[i] = (int)l[i], b.ylens[i] = (int)yl[i];
    for (int i = 0; i < 2 * b.stride; i++) b.labels[i] = (int)y[i];
    return b;
}

/* Forward, loss and backward of the fixture batch on `kind`; the joint in chunks when `chunked`
 * (transducer_set_joint_floats: 3 frames at a time); GRU layers when `gru` (its losses and
 * gradients from gru_ctc03, the decoder's and the joint's alone). */
static void check(backend_kind kind, int no_ctc, int chunked, double tol, int gru)
{
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(kind, 0, 1, &err)) != NULL, "%s", err.msg);
    pack w = load("weights"), c = load("ctc03"), gw = {0}, gc = {0};
    if (gru) gw = load("gru_weights"), gc = load("gru_ctc03");
    const pack *out = gru ? &gc : &c;
    model_dims d = fixture_dims(no_ctc, gru);
    model_rates rates = {.ctc_weight = no_ctc ? 0.0f : 0.3f, .tr_weight = 1.0f};
    asr_model m;
    asr_model_init(&m, be, &d, &rates);
    cr_assert_not_null(m.tr);
    if (chunked) transducer_set_joint_floats(&m, 2 * 8 * (2 * 20 + 12) * 3); /* 3 frames of 8 prefixes */
    load_weights(&m, &w, gru ? &gw : NULL, !no_ctc);
    batch_in b = load_batch(&c);
    float *feats = be->alloc(be, (size_t)2 * b.T * 80 * sizeof(float));
    be->copy(be, feats, b.feats, (size_t)2 * b.T * 80 * sizeof(float), BACKEND_HOST_TO_DEVICE);
    asr_model_zero_grad(&m);
    asr_model_forward(&m, feats, b.lens, 2, b.T, 0, 0);
    size_t n;
    const float *hl = pack_must(&c, "out.hlens", &n);
    cr_assert(m.hlens[0] == (int)hl[0] && m.hlens[1] == (int)hl[1]);
    double loss = asr_model_loss(&m, b.labels, b.ylens, b.stride, NULL);
    double ref_tr = pack_must(out, "out.loss_transducer", NULL)[0], ref = pack_must(out, "out.loss", NULL)[0];
    cr_expect_lt(fabs(m.loss_transducer - ref_tr) / ref_tr, tol, "loss_transducer %.8f vs ESPnet %.8f",
                 m.loss_transducer, ref_tr);
    if (no_ctc) {
        cr_expect(isnan(m.loss_ctc));
        cr_expect_lt(fabs(loss - ref_tr) / ref_tr, tol, "loss %.8f vs ESPnet's loss_transducer %.8f", loss, ref_tr);
    } else {
        double ref_ctc = pack_must(out, "out.loss_ctc", NULL)[0];
        cr_expect_lt(fabs(m.loss_ctc - ref_ctc) / ref_ctc, tol, "loss_ctc %.8f vs %.8f", m.loss_ctc, ref_ctc);
        cr_expect_lt(fabs(loss - ref) / ref, tol, "loss %.8f vs ESPnet %.8f", loss, ref);
    }
    asr_model_backward(&m, 1.0f);
    float *g = malloc(m.table.total * sizeof *g);
    be->synchronize(be);
    be->copy(be, g, m.grads, m.table.total * sizeof(float), BACKEND_DEVICE_TO_HOST);
    double worst = 0;
    for (size_t i = 0; i < m.table.n; i++) {
        const param_info *p = &m.table.items[i];
        char name[160];
        snprintf(name, sizeof name, "grad.%.127s", p->name);
        const float *ref_g = gru ? pack_get(out, name, &n) : pack_must(out, name, &n);
        if (!ref_g) { /* the GRU pack holds the decoder's and the joint's */
            cr_assert(strncmp(p->name, "decoder.", 8) && strncmp(p->name, "joint_network.", 14), "%s", p->name);
            continue;
        }
        cr_assert_eq(n, p->count, "%s", p->name);
        if (no_ctc && strncmp(p->name, "decoder.", 8) && strncmp(p->name, "joint_network.", 14)) continue;
        if (strstr(p->name, "linear_k.bias")) { /* softmax ignores it: rounding noise on both sides */
            cr_expect_lt(test_max_abs(g + p->offset, n), 1e-5, "%s", p->name);
            continue;
        }
        double e = pack_rel_err(g + p->offset, ref_g, n, 1.0);
        worst = fmax(worst, e);
        cr_expect_lt(e, 1e-4, "gradient of %s differs: %g", p->name, e);
    }
    cr_log_info("%s%s%s: loss %.7f (ESPnet %.7f), worst gradient rel err %.2g", be->name, gru ? " gru" : "",
                no_ctc ? " no ctc" : "", loss, ref, worst);
    free(g), free(b.feats);
    be->free(be, feats);
    pack_free(&w), pack_free(&c);
    if (gru) pack_free(&gw), pack_free(&gc);
    asr_model_free(&m);
    backend_close(be);
}

Test(transducer, loss_and_every_gradient_match_espnet_cpu) { check(BACKEND_CPU, 0, 0, 1e-5, 0); }

Test(transducer, loss_and_every_gradient_match_espnet_ref64) { check(BACKEND_REF64, 0, 0, 1e-5, 0); }

/* The joint 3 frames at a time (15 frames: 5 chunks, each computed again in the backward). */
Test(transducer, joint_in_chunks_gives_the_same) { check(BACKEND_CPU, 0, 1, 1e-5, 0); }

/* ctc_weight 0: no ctc module; the transducer's gradients alone (the decoder's and the joint's are
 * the same as with CTC: loss_ctc does not reach them). */
Test(transducer, ctc_weight_0_has_no_ctc_branch) { check(BACKEND_CPU, 1, 0, 1e-5, 0); }

/* rnn_type gru: torch.nn.GRU layers (decoder.decoder.<l>.*_l0 of 3 x 24 rows) on both backends. */
Test(transducer, gru_loss_and_gradients_match_espnet_cpu) { check(BACKEND_CPU, 0, 0, 1e-5, 1); }

Test(transducer, gru_loss_and_gradients_match_espnet_ref64) { check(BACKEND_REF64, 0, 0, 1e-5, 1); }
