/* The transducer's validation CER and WER as ESPnet2's error calculators (see transducer_errors.h). */
#include "core/decode/transducer_errors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"

int tr_err_calc_init(tr_err_calc *c, const token_list *tl, int body, int report_cer, int report_wer,
                     const char *sym_space, const char *sym_blank, int nstep, esp_err *err)
{
    *c = (tr_err_calc){.text = {.kind = body ? ERR_TRANSDUCER_BODY : ERR_TRANSDUCER_ASR, .tl = tl, .space = sym_space,
                                .blank = sym_blank, .cer = report_cer, .wer = report_wer},
                       .beam = 2};
    if (body) {
        c->search = (ts_opts)TS_OPTS_ASR_TRANSDUCER;
        c->search.search_type = TS_MAES;
        c->search.nstep = nstep;
    } else {
        c->search = (ts_opts)TS_OPTS_DEFAULT;
    }
    c->search.score_norm = 0;
    if (!report_cer && !report_wer) return 0;
    esp_err why;
    if (ts_check(&c->search, c->beam, (int)tl->n, &why) != 0)
        return esp_fail(err, "model.model_conf.report_cer / report_wer: the validation search cannot run (%s; set "
                             "both false)", why.msg);
    return 0;
}

int tr_err_calc_from_cfg(tr_err_calc *c, const token_list *tl, int body, const model_conf_cfg *mc, esp_err *err)
{
    err_calculator e;
    err_calculator_from_cfg(&e, body ? ERR_TRANSDUCER_BODY : ERR_TRANSDUCER_ASR, tl, mc);
    return tr_err_calc_init(c, tl, body, e.cer, e.wer, e.space, e.blank,
                            mc && mc->validation_nstep ? (int)*mc->validation_nstep : 2, err);
}

void tr_err_batch(const tr_err_calc *c, asr_model *m, const int *hlens, const int *labels, int lstride,
                  const int *label_lens, int B, double *cer, double *wer)
{
    int **hyps = xcalloc((size_t)B, sizeof *hyps), *nh = xcalloc((size_t)B, sizeof *nh);
    for (int i = 0; i < B; i++) {
        ts_result r;
        transducer_search(m, m->lnf + (size_t)i * m->T2 * m->dims.d, hlens[i], c->beam, &c->search, &r);
        if (r.n > 0) { /* the n-best's first: nbest_hyp[0].yseq[1:] */
            hyps[i] = r.hyps[0].ids, nh[i] = r.hyps[0].n;
            r.hyps[0].ids = NULL;
        }
        ts_result_free(&r);
    }
    err_calculator_rates(&c->text, hyps, nh, labels, lstride, label_lens, B, cer, wer);
    for (int i = 0; i < B; i++) free(hyps[i]);
    free(hyps);
    free(nh);
}
