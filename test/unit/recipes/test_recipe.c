/* Integration: the tiny default recipe end to end through the binary (stages 1-5, then infer and
 * pack_model with inference_tiny.yaml). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/formats/safetensors.h"
#include "core/formats/torch_zip.h"
#include "test/unit/test_util.h"

static char workdir[256];

/* Runs the binary with the tiny recipe, writing data under workdir; returns the exit status. */
static int run_recipe(const char *extra, const char *log)
{
    return test_sh("cd '%s' && timeout 300 '%s' --config recipes/espeak_fortunes/conf/training_tiny.yaml "
                   "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/exp %s >%s/%s.out 2>%s/%s.err",
                   test_root_dir(), test_bin_path(), workdir, workdir, workdir, workdir, extra, workdir, log, workdir,
                   log);
}

/* Runs stage(s) of the tiny inference config on what run_recipe wrote; returns the exit status. */
static int run_infer(const char *extra, const char *log)
{
    return test_sh("cd '%s' && timeout 300 '%s' --inference_config recipes/espeak_fortunes/conf/inference_tiny.yaml "
                   "data_dir=%s/data exp_dir=%s/exp %s >%s/%s.out 2>%s/%s.err",
                   test_root_dir(), test_bin_path(), workdir, workdir, extra, workdir, log, workdir, log);
}

/* The file named by fmt (a "%s" for workdir, then one for arg); NULL when it does not exist. */
static char *slurp(const char *fmt, const char *arg)
{
    char path[512];
    snprintf(path, sizeof path, fmt, workdir, arg);
    return test_exists(path) ? test_slurp(path) : NULL;
}

static void setup(void)
{
    test_tmpdir_make(workdir, sizeof workdir, "recipe");
}

static void teardown(void) { test_tmpdir_remove(workdir); }

/* No Criterion .timeout (it leaks in Criterion 2.4.1's runner under ASan): `timeout` bounds each run. */
TestSuite(recipe, .init = setup, .fini = teardown);

Test(recipe, stages_1_5_build_manifests_tokens_stats_logs_and_skip_when_built)
{
    cr_assert_eq(run_recipe("", "first"), 0, "first run failed: %s", slurp("%s/%s.err", "first"));
    char *err = slurp("%s/%s.err", "first");
    cr_assert(strstr(err, "=== [START] stage: create_dataset ==="));
    cr_assert(strstr(err, "=== [DONE] stage: create_dataset ("));
    cr_assert(strstr(err, "=== [DONE] stage: train_tokenizer ("));
    cr_assert(strstr(err, "=== [DONE] stage: collect_stats ("));
    cr_assert(strstr(err, "=== [DONE] stage: train ("));
    free(err);

    /* Stage 3 with the recipe's 2 workers: one shape line per utterance, stats beside them. */
    const char *stat_splits[] = {"train", "valid"};
    for (int i = 0; i < 2; i++) {
        char *shape = slurp("%s/stats/%s/feats_shape", stat_splits[i]);
        cr_assert_not_null(shape);
        cr_assert_eq(test_count_lines(shape), i == 0 ? 24 : 6);
        cr_assert(strstr(shape, ",80\n"));
        free(shape);
        char *npz = slurp("%s/stats/%s/stats_keys", stat_splits[i]);
        cr_assert_str_eq(npz, "feats\n");
        free(npz);
    }

    /* Manifests: header-less utt<TAB>wav<TAB>text, sizes from training_tiny.yaml. */
    const char *splits[] = {"train", "valid", "test"};
    const int sizes[] = {24, 6, 6};
    for (int i = 0; i < 3; i++) {
        char *m = slurp("%s/data/manifest/%s.tsv", splits[i]);
        cr_assert_not_null(m, "no manifest for %s", splits[i]);
        cr_assert_eq(test_count_lines(m), sizes[i], "%s has %d lines", splits[i], test_count_lines(m));
        char utt[256], wav[512], text[1024];
        cr_assert_eq(sscanf(m, "%255[^\t]\t%511[^\t]\t%1023[^\n]", utt, wav, text), 3);
        for (const char *c = text; *c; c++) cr_assert(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZ' ", *c), "bad char in %s", text);
        cr_assert_eq(wav[0], '/', "manifest wav path is not absolute: %s", wav);
        cr_assert_eq(access(wav, R_OK), 0, "missing wav %s", wav);
        free(m);
        char *scp = slurp("%s/data/%s/wav.scp", splits[i]);
        cr_assert_eq(test_count_lines(scp), sizes[i]);
        free(scp);
        char *u2s = slurp("%s/data/%s/utt2spk", splits[i]);
        cr_assert_eq(test_count_lines(u2s), sizes[i]);
        free(u2s);
        char *tx = slurp("%s/data/%s/text", splits[i]);
        cr_assert_eq(test_count_lines(tx), sizes[i]);
        free(tx);
    }

    /* ESPnet's char token list layout. */
    char *tok = slurp("%s/data/tokens_char/%s", "tokens.txt");
    cr_assert_not_null(tok);
    cr_assert(!strncmp(tok, "<blank>\n<unk>\n", 14), "tokens.txt starts %.20s", tok);
    cr_assert(strstr(tok, "<space>\n"));
    size_t n = strlen(tok);
    cr_assert(n > 11 && !strcmp(tok + n - 10, "<sos/eos>\n"));
    free(tok);

    /* Stage logs and the resolved config beside the outputs. */
    char *log = slurp("%s/data/%s", "create_dataset.log");
    cr_assert(log && strstr(log, "=== [DONE] stage: create_dataset"));
    free(log);
    char *cfg = slurp("%s/data/%s", "config.yaml");
    cr_assert(cfg && strstr(cfg, "num_train: 24") && !strstr(cfg, "${"));
    free(cfg);

    /* A second run skips the built dataset and rotates the stage log (X.log -> X1.log). */
    cr_assert_eq(run_recipe("--stages create_dataset", "second"), 0);
    char *err2 = slurp("%s/%s.err", "second");
    cr_assert(strstr(err2, "already built"), "no skip message: %s", err2);
    free(err2);
    char *old = slurp("%s/data/%s", "create_dataset1.log");
    cr_assert_not_null(old, "log was not rotated");
    free(old);

    /* Stage 6 (inference_tiny.yaml: beam 4, batch_size 4, 2 workers): ESPnet3's hyp.scp/ref.scp,
     * one `utt text` line per test utterance in manifest order. */
    cr_assert_eq(run_infer("--stages decode", "infer"), 0, "infer failed: %s", slurp("%s/%s.err", "infer"));
    char *hyp = slurp("%s/exp/inference/test/%s", "hyp.scp");
    char *ref = slurp("%s/exp/inference/test/%s", "ref.scp");
    char *man = slurp("%s/data/manifest/%s", "test.tsv");
    cr_assert(hyp && ref && man);
    cr_assert_eq(test_count_lines(hyp), 6);
    cr_assert_eq(test_count_lines(ref), 6);
    const char *h = hyp, *r = ref, *mline = man;
    for (int i = 0; i < 6; i++) {
        char mutt[256], mwav[512], mtext[1024], rutt[256], rtext[1024], hutt[256];
        cr_assert_eq(sscanf(mline, "%255[^\t]\t%511[^\t]\t%1023[^\n]", mutt, mwav, mtext), 3);
        cr_assert_eq(sscanf(r, "%255s %1023[^\n]", rutt, rtext), 2);
        cr_assert_eq(sscanf(h, "%255s", hutt), 1);
        cr_assert_str_eq(rutt, mutt, "ref.scp line %d", i);
        cr_assert_str_eq(rtext, mtext, "ref.scp line %d", i);
        cr_assert_str_eq(hutt, mutt, "hyp.scp line %d", i);
        /* Detokenized like ESPnet's char tokenizer: <space> became ' ', no blanks or token markup. */
        const char *t = h + strlen(hutt);
        for (; *t && *t != '\n'; t++) cr_assert(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZ' ", *t), "hyp: %.80s", h);
        h = strchr(h, '\n') + 1, r = strchr(r, '\n') + 1, mline = strchr(mline, '\n') + 1;
    }
    char *ilog = slurp("%s/exp/inference/%s", "infer.log");
    cr_assert(ilog && strstr(ilog, "=== [DONE] stage: infer"));
    free(ilog);

    /* The same hypotheses for another batch_size and worker count. */
    cr_assert_eq(run_infer("--stages infer model.batch_size=1 parallel.n_workers=1 'inference_dir=${exp_dir}/inf_b1'",
                           "infer_b1"),
                 0, "%s", slurp("%s/%s.err", "infer_b1"));
    char *hyp_b1 = slurp("%s/exp/inf_b1/test/%s", "hyp.scp");
    cr_assert_str_eq(hyp_b1, hyp);
    free(hyp_b1);

    /* An unreadable audio file in the middle of a batch (batch_size 4): the error names its own
     * utterance, not the first one of the batch. */
    {
        char *m = slurp("%s/data/manifest/%s", "test.tsv");
        const char *third = strchr(strchr(m, '\n') + 1, '\n') + 1;
        char utt[256], wav[512];
        cr_assert_eq(sscanf(third, "%255[^\t]\t%511[^\t]", utt, wav), 2);
        cr_assert_eq(test_sh("cp '%s' '%s/saved.wav' && head -c 30 '%s/saved.wav' > '%s'", wav, workdir, workdir, wav), 0);
        cr_assert_eq(run_infer("--stages infer 'inference_dir=${exp_dir}/inf_bad'", "infer_bad"), 1);
        char *e = slurp("%s/%s.err", "infer_bad");
        char want[1024];
        snprintf(want, sizeof want, "infer test: %s: %s: cannot read audio", utt, wav);
        cr_assert(strstr(e, want), "want '%s' in:\n%s", want, e);
        cr_assert_eq(test_sh("cp '%s/saved.wav' '%s'", workdir, wav), 0);
        free(e), free(m);
    }

    /* nbest 3: the same hyp.scp, and ESPnet2's n-best layout beside it (the prefix beam's final beam). */
    cr_assert_eq(run_infer("--stages infer model.nbest=3 'inference_dir=${exp_dir}/inf_nb'", "infer_nb"), 0, "%s",
                 slurp("%s/%s.err", "infer_nb"));
    char *hyp_nb = slurp("%s/exp/inf_nb/test/%s", "hyp.scp"), *best1 = slurp("%s/exp/inf_nb/test/%s", "1best_recog/text");
    cr_assert_str_eq(hyp_nb, hyp);
    cr_assert_str_eq(best1, hyp);
    free(hyp_nb), free(best1);
    const char *nb_files[] = {"2best_recog/text", "3best_recog/token", "3best_recog/token_int", "1best_recog/score"};
    for (int i = 0; i < 4; i++) {
        char *f = slurp("%s/exp/inf_nb/test/%s", nb_files[i]);
        cr_assert_not_null(f, "%s", nb_files[i]);
        cr_assert_eq(test_count_lines(f), 6, "%s", nb_files[i]);
        cr_assert_eq(strncmp(f, man, strcspn(man, "\t")), 0, "%s: first utterance first", nb_files[i]);
        free(f);
    }
    /* The joint search needs an attention decoder, which this model has not: one error line before decoding. */
    cr_assert_eq(run_infer("--stages infer model.ctc_weight=0.5 'inference_dir=${exp_dir}/inf_joint'", "joint"), 1);
    char *je = slurp("%s/%s.err", "joint");
    cr_assert(strstr(je, "model.ctc_weight 0.5: model has no attention decoder (decoder: transformer): use ctc_weight "
                         "1.0"), "%s", je);
    free(je);

    /* A model file that is not there: one error line naming what was tried, exit 1. */
    cr_assert_eq(run_infer("--stages infer model.asr_model_file=valid.acc.best.pth", "nomodel"), 1);
    char *nm = slurp("%s/%s.err", "nomodel");
    cr_assert(strstr(nm, "espnet3: error: valid.acc.best.pth: no model weights (tried "), "%s", nm);
    free(nm);

    /* Stage 8: the pack decodes on its own once the experiment directory is gone. */
    cr_assert_eq(run_infer("--stages pack_model", "pack"), 0, "%s", slurp("%s/%s.err", "pack"));
    cr_assert_eq(test_sh("mv '%s/exp/model_pack' '%s/pack' && rm -rf '%s/exp'", workdir, workdir, workdir), 0);
    char *readme = slurp("%s/pack/%s", "README.md");
    cr_assert(readme && strstr(readme, "--inference_config"));
    free(readme);
    cr_assert_eq(test_sh("cd / && timeout 300 '%s' --template_dir '%s/conf' --inference_config '%s/pack/conf/inference.yaml' "
                         "--stages infer >%s/packed.out 2>%s/packed.err",
                         test_bin_path(), test_root_dir(), workdir, workdir, workdir),
                 0, "%s", slurp("%s/%s", "packed.err"));
    char *hyp_pack = slurp("%s/pack/inference/test/%s", "hyp.scp");
    cr_assert_str_eq(hyp_pack, hyp);
    free(hyp_pack);

    /* The pack's ESPnet2 side: its .pth holds our tensors bit for bit (round trip ours -> .pth ->
     * ours), plus the frontend's and GlobalMVN's buffers; decoding from the .pth gives the same text. */
    char pth[512], st[512];
    snprintf(pth, sizeof pth, "%s/pack/espnet/exp/asr_train/valid.loss.ave.pth", workdir);
    snprintf(st, sizeof st, "%s/pack/model.safetensors", workdir);
    st_file a, b;
    esp_err e = {{0}};
    cr_assert_eq(st_read(st, &a, &e), 0, "%s", e.msg);
    cr_assert_eq(pt_read(pth, &b, &e), 0, "%s", e.msg);
    cr_assert_eq(b.n, a.n + 3, "%zu tensors in the .pth, %zu in the safetensors", b.n, a.n);
    for (size_t i = 0; i < a.n; i++) {
        const st_tensor *x = &a.tensors[i], *y = st_get(&b, x->name);
        cr_assert_not_null(y, "%s missing from the .pth", x->name);
        cr_assert(x->dtype == y->dtype && x->ndim == y->ndim && st_nbytes(x) == st_nbytes(y), "%s", x->name);
        cr_assert_eq(memcmp(x->data, y->data, st_nbytes(x)), 0, "%s differs", x->name);
    }
    cr_assert_not_null(st_get(&b, "encoder.embed.out.0.weight"));
    const st_tensor *mel = st_get(&b, "frontend.logmel.melmat"), *std = st_get(&b, "normalize.std");
    cr_assert(mel && mel->ndim == 2 && mel->shape[0] == 257 && mel->shape[1] == 80);
    cr_assert(std && std->ndim == 1 && std->shape[0] == 80 && st_get(&b, "normalize.mean"));
    st_close(&a);
    st_close(&b);
    char *ecfg = slurp("%s/pack/espnet/exp/asr_train/%s", "config.yaml");
    cr_assert(ecfg && strstr(ecfg, "\nencoder: transformer\n") && strstr(ecfg, "\ntoken_list:\n- \"<blank>\"\n") &&
                  strstr(ecfg, "stats_file: exp/asr_stats/train/feats_stats.npz") && strstr(ecfg, "ctc_weight: 1.0") &&
                  strstr(ecfg, "\ntoken_type: char\n"),
              "%s", ecfg);
    free(ecfg);
    cr_assert(test_exists(test_path(workdir, "pack/espnet/exp/asr_stats/train/feats_stats.npz")));
    cr_assert(test_exists(test_path(workdir, "pack/espnet/meta.yaml")));
    cr_assert_eq(test_sh("cd / && timeout 300 '%s' --template_dir '%s/conf' --inference_config '%s/pack/conf/inference.yaml' "
                         "--stages infer model.asr_model_file=%s inference_dir=%s/inf_pth >%s/pth.out 2>%s/pth.err",
                         test_bin_path(), test_root_dir(), workdir, pth, workdir, workdir, workdir),
                 0, "%s", slurp("%s/%s", "pth.err"));
    hyp_pack = slurp("%s/inf_pth/test/%s", "hyp.scp");
    cr_assert_str_eq(hyp_pack, hyp);
    free(hyp_pack);
    free(hyp);
    free(ref);
    free(man);
}

Test(recipe, missing_espeak_ng_is_one_error_line)
{
    /* PATH without espeak-ng; the binary itself is given by absolute path. */
    cr_assert_eq(test_sh("cd '%s' && PATH=/nonexistent /usr/bin/timeout 60 '%s' --config "
                         "recipes/espeak_fortunes/conf/training_tiny.yaml data_dir=%s/data dataset_dir=%s/dl "
                         "--stages create_dataset >%s/o 2>%s/e; echo $? >%s/rc",
                         test_root_dir(), test_bin_path(), workdir, workdir, workdir, workdir, workdir),
                 0);
    char *rc = slurp("%s/%s", "rc");
    cr_assert_str_eq(rc, "1\n");
    char *err = slurp("%s/%s", "e");
    cr_assert(strstr(err, "espnet3: error: ") && strstr(err, "espeak-ng"), "stderr: %s", err);
    cr_assert(strstr(err, "install the Debian package espeak-ng"), "stderr: %s", err);
    free(rc);
    free(err);
}

/* The tiny recipe with the default recipe's engines (espeak-ng + festival), flite held out as the
 * test_engine split, generated RIRs/noises and data_aug_effects: stages 1-7 run, both test sets
 * are decoded and scored. */
Test(recipe, engines_noise_and_reverb_run_stages_1_7)
{
    test_skip_under_sanitizer("the synthesizers, noise and reverberation end to end; they run under ASan in "
                              "espeak_fortunes/*, noise_rir/*, augment_data/* and train_augment/*");
    int rc = test_sh("cd '%s' && timeout 300 '%s' --config recipes/espeak_fortunes/conf/training_tiny_engines.yaml "
                     "--inference_config recipes/espeak_fortunes/conf/inference_tiny_engines.yaml "
                     "--metrics_config recipes/espeak_fortunes/conf/metrics.yaml "
                     "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/exp >%s/e.out 2>%s/e.err",
                     test_root_dir(), test_bin_path(), workdir, workdir, workdir, workdir, workdir, workdir);
    char *err = slurp("%s/%s", "e.err");
    cr_assert_eq(rc, 0, "run failed: %s", err);
    cr_assert(strstr(err, "with espeak-ng, festival, nj=2"), "%s", err);
    cr_assert(strstr(err, "train: reverberation (3 RIRs, rir_apply_prob 0.5) and noise (2 files"), "%s", err);
    cr_assert(strstr(err, "train: waveform augmentation of the training split: 5 data_aug_effects entries"), "%s", err);
    cr_assert(strstr(err, "measure: test_engine WER"), "%s", err);
    cr_assert(strstr(err, "measure: test CER"), "%s", err);
    cr_assert_null(strstr(err, "WARNING"), "%s", err);
    free(err);
    char *te = slurp("%s/data/manifest/%s", "test_engine.tsv");
    cr_assert_eq(test_count_lines(te), 6);
    cr_assert(!strncmp(te, "flite_", 6), "%s", te);
    free(te);
    char *train = slurp("%s/data/manifest/%s", "train.tsv");
    cr_assert(strstr(train, "\nfestival_") || !strncmp(train, "festival_", 9), "no festival speech in train:\n%s", train);
    free(train);
    char *hyp = slurp("%s/exp/inference/test_engine/%s", "hyp.scp");
    cr_assert_eq(test_count_lines(hyp), 6);
    free(hyp);
    char *scp = slurp("%s/dl/%s", "rir.scp");
    cr_assert_eq(test_count_lines(scp), 3);
    free(scp);
}
