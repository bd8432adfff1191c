/* Two-way ESPnet parity for the Conformer and E-Branchformer encoders
 * (scripts/make_interop_fixtures.py --encoder conformer|e_branchformer, run with the real ESPnet 202511):
 *   espnet_model   trained 300 steps with ESPnet's own classes (the Conformer's BatchNorm running
 *                  statistics come from that training), config.yaml and .pth as ESPnet wrote them;
 *   espnet3_model  trained by espnet3 and packed for ESPnet, which ESPnet loaded with strict=True.
 * Every hypothesis ESPnet's Speech2Text gave (joint search with ctc_weight 0.3 and 0.5, beam 1 and 4,
 * nbest 2; greedy CTC) is espnet3's: token ids and text equal, scores within 1e-4 relative. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend_cpu.h"
#include "core/config/yamltree.h"
#include "core/decode/speech2text.h"
#include "core/nn/model_files.h"
#include "test/unit/test_util.h"

static const char *fx(const char *enc, const char *rel)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/test/fixtures/interop/%s%s%s", test_root_dir(), enc, *enc ? "/" : "", rel);
    return p[k];
}

typedef struct {
    char model[32], search[16], utt[16], ids[1024], text[1024];
    double ctc_weight, score;
    int beam, rank;
} want_hyp;

/* hyps.txt: <model> <search> <ctc_weight> <beam> <rank> <utt> <score> <ids>|<text> */
static size_t read_hyps(const char *enc, want_hyp **out)
{
    char *all = test_slurp(fx(enc, "hyps.txt")), *save = NULL;
    size_t n = 0, cap = 16;
    want_hyp *w = malloc(cap * sizeof *w);
    for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (n == cap) w = realloc(w, (cap *= 2) * sizeof *w);
        want_hyp *h = &w[n];
        char rest[1024];
        cr_assert_eq(sscanf(line, "%31s %15s %lf %d %d %15s %lf %1023[^\n]", h->model, h->search, &h->ctc_weight,
                            &h->beam, &h->rank, h->utt, &h->score, rest),
                     8, "%s", line);
        char *bar = strchr(rest, '|');
        cr_assert_not_null(bar, "%s", line);
        *bar = '\0';
        snprintf(h->ids, sizeof h->ids, "%s", rest);
        snprintf(h->text, sizeof h->text, "%s", bar + 1);
        n++;
    }
    free(all);
    *out = w;
    return n;
}

static void ids_str(const s2t_hyp *h, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (size_t i = 0; i < h->n_ids; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%d", i ? " " : "", h->ids[i]);
}

static int rel_close(double a, double b) { return fabs(a - b) <= 1e-4 * fmax(fabs(b), 1e-3); }

/* Decodes every utterance of `model` with each setting ESPnet was run with and compares all its hypotheses. */
static void decode_like_espnet_cfg(const char *enc, const char *model, const char *pth, const char *cfg)
{
    want_hyp *w;
    size_t n = read_hyps(enc, &w), checked = 0, joint_nbest2 = 0;
    char cfg_path[600], model_path[700];
    snprintf(cfg_path, sizeof cfg_path, "%s/exp/asr_train/config.yaml", fx(enc, model));
    if (cfg) snprintf(cfg_path, sizeof cfg_path, "%s", cfg);
    snprintf(model_path, sizeof model_path, "%s/%s", fx(enc, model), pth);
    static const struct {
        const char *search;
        double cw;
        int beam;
    } runs[] = {{"joint", 0.3, 1}, {"joint", 0.3, 4}, {"joint", 0.5, 1}, {"joint", 0.5, 4}, {"greedy", 1.0, 1}};
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        int joint = !strcmp(runs[r].search, "joint"), nbest = joint ? 2 : 1;
        infer_model_cfg mc = {.asr_train_config = cfg_path, .asr_model_file = model_path,
                              .beam_size = runs[r].beam, .ctc_weight = runs[r].cw, .nbest = nbest};
        inference_cfg ic = {.model = &mc};
        model_files mf;
        esp_err err = {{0}};
        cr_assert_eq(model_files_locate(&mf, &ic, "inference.yaml", &err), 0, "%s", err.msg);
        backend be;
        cr_assert_eq(backend_cpu_init(&be, 1, &err), 0, "%s", err.msg);
        s2t_opts o = {.beam_size = runs[r].beam, .ctc_weight = runs[r].cw, .nbest = nbest};
        speech2text *s = speech2text_open(&be, &mf, &o, &err);
        cr_assert_not_null(s, "%s", err.msg);
        static const char *const utts[] = {"utt1", "utt2", "utt3"};
        for (int u = 0; u < 3; u++) {
            char wav[64];
            snprintf(wav, sizeof wav, "wav/%s.wav", utts[u]);
            const char *paths[1] = {fx("", wav)};
            s2t_hyp h;
            cr_assert_eq(speech2text_decode_files(s, paths, 1, &h, &err), 0, "%s", err.msg);
            int espnet_found = 0;
            for (size_t i = 0; i < n; i++) {
                const want_hyp *x = &w[i];
                if (strcmp(x->model, model) || strcmp(x->search, runs[r].search) || x->beam != runs[r].beam ||
                    fabs(x->ctc_weight - runs[r].cw) > 1e-9 || strcmp(x->utt, utts[u]))
                    continue;
                espnet_found++;
                const s2t_hyp *g = x->rank == 0 ? &h : x->rank - 1 < h.n_found - 1 ? &h.alt[x->rank - 1] : NULL;
                cr_expect_not_null(g, "%s %s %s cw %.1f beam %d %s: no hypothesis %d (espnet3 found %d)", enc,
                                   model, x->search, x->ctc_weight, x->beam, x->utt, x->rank, h.n_found);
                if (!g) continue;
                char got[512];
                ids_str(g, got, sizeof got);
                cr_expect_str_eq(got, x->ids, "%s %s %s cw %.1f beam %d %s #%d: ids '%s', ESPnet '%s'", enc, model,
                                 x->search, x->ctc_weight, x->beam, x->utt, x->rank, got, x->ids);
                cr_expect_str_eq(g->text, x->text, "%s %s %s beam %d %s #%d: text", enc, model, x->search, x->beam,
                                 x->utt, x->rank);
                cr_expect(rel_close(g->score, x->score), "%s %s %s cw %.1f beam %d %s #%d: score %.9g, ESPnet %.9g",
                          enc, model, x->search, x->ctc_weight, x->beam, x->utt, x->rank, g->score, x->score);
                checked++;
                joint_nbest2 += x->rank == 1;
            }
            if (joint) /* as many hypotheses as ESPnet returned (nbest 2) */
                cr_expect_eq(h.n_found, espnet_found, "%s %s cw %.1f beam %d %s: %d hypotheses, ESPnet %d", enc,
                             model, runs[r].cw, runs[r].beam, utts[u], h.n_found, espnet_found);
            s2t_hyp_free(&h);
        }
        speech2text_close(s);
        be.destroy(&be);
        model_files_free(&mf);
    }
    free(w);
    /* 4 joint settings and greedy, 3 utterances each, some with a second hypothesis */
    cr_assert_geq(checked, 15, "%s %s: %zu hypotheses compared", enc, model, checked);
    cr_assert_gt(joint_nbest2, 0, "%s %s: no second-best hypothesis compared", enc, model);
}

static void decode_like_espnet(const char *enc, const char *model, const char *pth)
{
    decode_like_espnet_cfg(enc, model, pth, NULL);
}

/* ESPnet's config.yaml with every keyword argument of ESPnet's encoder class (encoder_args.txt, from its
 * signature) that the fixture's encoder_conf leaves out, at ESPnet's default: each is a key espnet3 reads
 * (an unknown key would be an error), and the model stays the one ESPnet decoded. */
static void every_encoder_arg(const char *enc)
{
    char dir[64];
    test_tmpdir_make(dir, sizeof dir, "interop_args");
    esp_err err = {{0}};
    ynode *root = yt_parse_file(fx(enc, "espnet_model/exp/asr_train/config.yaml"), &err);
    cr_assert_not_null(root, "%s", err.msg);
    ynode *ec = yt_map_get(root, "encoder_conf");
    cr_assert(ec && ec->kind == YN_MAP);
    size_t given = ec->n;
    char *args = test_slurp(fx(enc, "encoder_args.txt")), *save = NULL;
    int n_args = 0;
    for (char *line = strtok_r(args, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        cr_assert_not_null(sp, "%s", line);
        *sp = '\0';
        n_args++;
        if (yt_map_get(ec, line)) continue;
        /* (a document of only null parses as an empty mapping, as an empty config) */
        ynode *v = !strcmp(sp + 1, "null") ? yt_scalar("null", 0, (ymark){0})
                                           : yt_parse_string(sp + 1, strlen(sp + 1), "encoder_args.txt", &err);
        cr_assert_not_null(v, "%s: %s", line, err.msg);
        yt_map_set(ec, line, (ymark){0}, v);
    }
    free(args);
    cr_assert_eq(ec->n, (size_t)n_args, "%s: %zu keys in encoder_conf, ESPnet's encoder takes %d", enc, ec->n,
                 n_args);
    cr_assert_lt(given, ec->n);
    size_t len;
    char *text = yt_emit(root, &len);
    yt_free(root);
    cr_assert_eq(test_sh("mkdir -p '%s/exp/asr_train' '%s/exp/asr_stats/train' && cp '%s' '%s/exp/asr_stats/train/'",
                         dir, dir, fx(enc, "espnet_model/exp/asr_stats/train/feats_stats.npz"), dir),
                 0);
    test_write_text(test_path(dir, "exp/asr_train/config.yaml"), text);
    free(text);
    char cfg[256];
    snprintf(cfg, sizeof cfg, "%s", test_path(dir, "exp/asr_train/config.yaml"));
    decode_like_espnet_cfg(enc, "espnet_model", "exp/asr_train/valid.acc.ave.pth", cfg);
    test_tmpdir_remove(dir);
}

Test(interop_encoders, espnet2_conformer_config_with_every_encoder_arg)
{
    every_encoder_arg("conformer");
}

Test(interop_encoders, espnet2_e_branchformer_config_with_every_encoder_arg)
{
    every_encoder_arg("e_branchformer");
}

Test(interop_encoders, espnet_conformer_decodes_to_espnets_hypotheses)
{
    decode_like_espnet("conformer", "espnet_model", "exp/asr_train/valid.acc.ave.pth");
}

/* ESPnet2's trainer resume file (checkpoint.pth: model, reporter with numpy scalars, optimizers,
 * schedulers, scaler; written by the real ESPnet2, scripts/make_trainer_checkpoint_fixtures.py):
 * its model part decodes to the hypotheses of the state dict it holds. */
Test(interop_encoders, espnet2_trainer_checkpoint_decodes_as_its_state_dict)
{
    decode_like_espnet("conformer", "espnet_model", "exp/asr_train/checkpoint.pth");
}

Test(interop_encoders, espnet3_conformer_decodes_in_espnet_as_in_espnet3)
{
    decode_like_espnet("conformer", "espnet3_model", "exp/asr_train/valid.loss.ave.pth");
}

Test(interop_encoders, espnet_e_branchformer_decodes_to_espnets_hypotheses)
{
    decode_like_espnet("e_branchformer", "espnet_model", "exp/asr_train/valid.acc.ave.pth");
}

Test(interop_encoders, espnet3_e_branchformer_decodes_in_espnet_as_in_espnet3)
{
    decode_like_espnet("e_branchformer", "espnet3_model", "exp/asr_train/valid.loss.ave.pth");
}

/* pack_model's ESPnet config.yaml gives ESPnet's encoder class only keys it takes (encoder_args.txt, its
 * signature): the tiny E-Branchformer recipe inherits normalize_before: true, which stage 5 accepts
 * with a warning but EBranchformerEncoder.__init__ would refuse with a TypeError (it once was written). */
static void packed_encoder_conf_keys_are_espnets(const char *enc, const char *train_cfg, const char *extra)
{
    char dir[64];
    test_tmpdir_make(dir, sizeof dir, "interop_pack");
    cr_assert_eq(test_sh("cd '%s' && timeout 300 '%s' -q --config recipes/espeak_fortunes/conf/%s.yaml "
                         "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/exp trainer.max_epochs=1 "
                         "%s >%s/log 2>&1 && timeout 300 '%s' -q --inference_config "
                         "recipes/espeak_fortunes/conf/inference_tiny.yaml data_dir=%s/data exp_dir=%s/exp "
                         "--stages pack_model >>%s/log 2>&1",
                         test_root_dir(), test_bin_path(), train_cfg, dir, dir, dir, dir, extra, dir, test_bin_path(),
                         dir, dir, dir),
                 0, "%s", test_slurp_or_empty(test_path(dir, "log")));
    esp_err err = {{0}};
    ynode *root = yt_parse_file(test_path(dir, "exp/model_pack/espnet/exp/asr_train/config.yaml"), &err);
    cr_assert_not_null(root, "%s", err.msg);
    const ynode *e = yt_map_get(root, "encoder"), *ec = yt_map_get(root, "encoder_conf");
    cr_assert(e && e->kind == YN_SCALAR && !strcmp(e->str, enc));
    cr_assert(ec && ec->kind == YN_MAP && ec->n > 0);
    char *args = test_slurp(fx(enc, "encoder_args.txt"));
    for (size_t i = 0; i < ec->n; i++) {
        char want[128];
        snprintf(want, sizeof want, "\n%s ", ec->keys[i]);
        cr_expect(strstr(args, want) || !strncmp(args, want + 1, strlen(want + 1)),
                  "%s: encoder_conf.%s is not a keyword argument of ESPnet's encoder class", enc, ec->keys[i]);
    }
    free(args);
    yt_free(root);
    test_tmpdir_remove(dir);
}

Test(interop_encoders, packed_e_branchformer_config_has_only_espnets_encoder_keys)
{
    packed_encoder_conf_keys_are_espnets("e_branchformer", "training_tiny_ebranchformer", "");
}

Test(interop_encoders, packed_conformer_config_has_only_espnets_encoder_keys)
{
    packed_encoder_conf_keys_are_espnets("conformer", "training_tiny_conformer", "");
}
