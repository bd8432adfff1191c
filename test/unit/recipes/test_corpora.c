/* Real corpora and ESPnet3's recipe files: the LibriSpeech and AN4 tree readers, Kaldi dirs with
 * command pipes, the dataset: block's sources (concatenation, duplicates, missing splits), and the
 * mini_an4 and librispeech_100 recipes end to end through the binary from their own folders with
 * ESPnet3's configs (small overrides only). */
#include <criterion/criterion.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/data/audio.h"
#include "core/data/dataset_src.h"
#include "core/formats/corpus.h"
#include "core/formats/manifest.h"
#include "test/unit/test_util.h"

static char workdir[256];

static void setup(void) { test_tmpdir_make(workdir, sizeof workdir, "corpora"); }
static void teardown(void) { test_tmpdir_remove(workdir); }

TestSuite(corpora, .init = setup, .fini = teardown);

/* A short FLAC of a few tones (different per utterance), written with libsndfile. */
static void write_flac(const char *path, int seed, double seconds)
{
    int n = (int)(16000 * seconds);
    float *x = malloc((size_t)n * sizeof *x);
    for (int i = 0; i < n; i++) {
        double t = i / 16000.0;
        x[i] = (float)(0.2 * sin(2 * M_PI * (200 + 37 * seed) * t) + 0.1 * sin(2 * M_PI * (900 + 53 * seed) * t) *
                                                                        sin(2 * M_PI * 3 * t));
    }
    SF_INFO info = {.samplerate = 16000, .channels = 1, .format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    cr_assert_not_null(sf, "%s: %s", path, sf_strerror(NULL));
    cr_assert_eq(sf_writef_float(sf, x, n), n);
    sf_close(sf);
    free(x);
}

static const char *const words[] = {"THE", "CAT", "SAT", "ON", "A", "MAT", "AND", "DOG", "RAN", "HOME"};

/* <root>/LibriSpeech/<split>/<spk>/<chapter>/: n_spk speakers, one chapter each, n_utt utterances. */
static void make_split(const char *root, const char *split, int spk0, int n_spk, int n_utt)
{
    for (int s = 0; s < n_spk; s++) {
        int spk = spk0 + s, ch = 100 + spk;
        char dir[512], trans[600], text[2048] = "";
        snprintf(dir, sizeof dir, "%s/LibriSpeech/%s/%d/%d", root, split, spk, ch);
        for (int u = 0; u < n_utt; u++) {
            char flac[700], line[256];
            snprintf(flac, sizeof flac, "%s/%d-%d-%04d.flac", dir, spk, ch, u);
            snprintf(line, sizeof line, "%d-%d-%04d %s %s %s\n", spk, ch, u, words[(spk + u) % 10],
                     words[(spk * 3 + u) % 10], words[(u * 7 + 1) % 10]);
            strcat(text, line);
            if (u == 0) {
                snprintf(trans, sizeof trans, "%s/x", dir);
                test_write_text_mkdirs(trans, "");
                remove(trans);
            }
            write_flac(flac, spk * 10 + u, 0.4 + 0.05 * u);
        }
        snprintf(trans, sizeof trans, "%s/%d-%d.trans.txt", dir, spk, ch);
        test_write_text(trans, text);
    }
}

static void make_librispeech(const char *root)
{
    make_split(root, "train-clean-100", 10, 3, 4);
    make_split(root, "dev-clean", 20, 1, 2);
    make_split(root, "dev-other", 30, 1, 2);
    make_split(root, "test-clean", 40, 1, 2);
    make_split(root, "test-other", 50, 1, 2);
}

Test(corpora, librispeech_tree_reads_sorted_with_speakers_and_flac_paths)
{
    make_librispeech(workdir);
    manifest m;
    esp_err err;
    cr_assert_eq(corpus_read_librispeech(workdir, "train-clean-100", &m, &err), 0, "%s", err.msg);
    cr_assert_eq(m.n, 12);
    cr_assert_str_eq(m.items[0].utt, "10-110-0000");
    cr_assert_str_eq(m.items[0].spk, "10-110");
    cr_assert(strstr(m.items[0].wav, "LibriSpeech/train-clean-100/10/110/10-110-0000.flac"));
    cr_assert_str_eq(m.items[0].text, "THE THE CAT");
    for (size_t i = 1; i < m.n; i++) cr_assert_lt(strcmp(m.items[i - 1].utt, m.items[i].utt), 0);
    manifest_free(&m);
    /* root may also be the LibriSpeech folder itself */
    cr_assert_eq(corpus_read_librispeech(test_path(workdir, "LibriSpeech"), "dev-clean", &m, &err), 0, "%s", err.msg);
    cr_assert_eq(m.n, 2);
    manifest_free(&m);
}

Test(corpora, librispeech_bad_input_names_file_and_line)
{
    make_split(workdir, "dev-clean", 20, 1, 2);
    manifest m;
    esp_err err;
    const char *trans = test_path(workdir, "LibriSpeech/dev-clean/20/120/20-120.trans.txt");
    /* a line without a transcript separator */
    test_write_text(trans, "20-120-0000 THE CAT\n20-120-0001\n");
    cr_assert_eq(corpus_read_librispeech(workdir, "dev-clean", &m, &err), -1);
    cr_assert(strstr(err.msg, "20-120.trans.txt:2: expected"), "%s", err.msg);
    /* an id from another chapter */
    test_write_text(trans, "20-121-0000 THE CAT\n");
    cr_assert_eq(corpus_read_librispeech(workdir, "dev-clean", &m, &err), -1);
    cr_assert(strstr(err.msg, "20-120.trans.txt:1: utterance id '20-121-0000' is not"), "%s", err.msg);
    /* an id twice */
    test_write_text(trans, "20-120-0000 THE CAT\n20-120-0000 A DOG\n");
    cr_assert_eq(corpus_read_librispeech(workdir, "dev-clean", &m, &err), -1);
    cr_assert(strstr(err.msg, "utterance id 20-120-0000 appears twice"), "%s", err.msg);
    /* an utterance without its audio */
    test_write_text(trans, "20-120-0000 THE CAT\n20-120-0007 A DOG\n");
    cr_assert_eq(corpus_read_librispeech(workdir, "dev-clean", &m, &err), -1);
    cr_assert(strstr(err.msg, "20-120.trans.txt:2: utterance 20-120-0007: no audio file"), "%s", err.msg);
    /* an empty split */
    test_write_text(trans, "\n");
    cr_assert_eq(corpus_read_librispeech(workdir, "dev-clean", &m, &err), -1);
    cr_assert(strstr(err.msg, "dev-clean: no utterances"), "%s", err.msg);
    /* a missing split */
    cr_assert_eq(corpus_read_librispeech(workdir, "test-other", &m, &err), -1);
    cr_assert(strstr(err.msg, "missing LibriSpeech split test-other"), "%s", err.msg);
    cr_assert_eq(m.n, 0);
}

Test(corpora, an4_transcript_lines_parse_as_espnet_does)
{
    char *utt, *src, *w;
    cr_assert_eq(corpus_an4_parse_line("<s> MARCH THIRD </s> (cen8-fbbh-b)", &utt, &src, &w), 0);
    cr_assert_str_eq(utt, "fbbh-cen8-b");
    cr_assert_str_eq(src, "cen8-fbbh-b");
    cr_assert_str_eq(w, "MARCH THIRD");
    free(utt), free(src), free(w);
    cr_assert_eq(corpus_an4_parse_line("ELEVEN TWENTY (cen8-fcaw-b)  ", &utt, &src, &w), 0);
    cr_assert_str_eq(w, "ELEVEN TWENTY");
    free(utt), free(src), free(w);
    cr_assert_eq(corpus_an4_parse_line("NO ID HERE", &utt, &src, &w), -1);
    cr_assert_eq(corpus_an4_parse_line("(a-b-c)", &utt, &src, &w), -1);
    cr_assert_eq(corpus_an4_parse_line("WORDS (a-b)", &utt, &src, &w), -1);
    cr_assert_eq(corpus_an4_parse_line("WORDS (a-b-c-d)", &utt, &src, &w), -1);
    cr_assert_null(utt);
}

Test(corpora, an4_bad_line_and_missing_audio_name_file_and_line)
{
    test_write_text_mkdirs(test_path(workdir, "an4/etc/an4_train.transcription"), "<s> YES </s> (an1-fash-b)\nGARBAGE\n");
    test_write_text_mkdirs(test_path(workdir, "an4/wav/an4_clstk/fash/an1-fash-b.sph"), "");
    manifest m;
    esp_err err;
    cr_assert_eq(corpus_read_an4(test_path(workdir, "an4"), "train", &m, &err), -1);
    cr_assert(strstr(err.msg, "an4_train.transcription:2: expected"), "%s", err.msg);
    test_write_text(test_path(workdir, "an4/etc/an4_train.transcription"), "<s> YES </s> (an1-fash-b)\nNO (an2-fash-b)\n");
    cr_assert_eq(corpus_read_an4(test_path(workdir, "an4"), "train", &m, &err), -1);
    cr_assert(strstr(err.msg, "an4_train.transcription:2: utterance fash-an2-b: no audio file"), "%s", err.msg);
    cr_assert_eq(corpus_read_an4(test_path(workdir, "an4"), "dev", &m, &err), -1);
    cr_assert(strstr(err.msg, "AN4 has the splits train and test"), "%s", err.msg);
}

Test(corpora, kaldi_wav_scp_pipe_is_refused_with_its_line)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/kaldi", workdir);
    test_write_text_mkdirs(test_path(dir, "wav.scp"), "u1 /a/u1.wav\nu2 sox /a/u2.flac -t wav - |\n");
    test_write_text(test_path(dir, "text"), "u1 HELLO\nu2 WORLD\n");
    manifest m;
    esp_err err;
    cr_assert_eq(manifest_read_kaldi_dir(dir, &m, &err), -1);
    cr_assert(strstr(err.msg, "wav.scp:2: utterance u2: 'sox /a/u2.flac -t wav - |' is a command pipe"), "%s", err.msg);
    test_write_text(test_path(dir, "wav.scp"), "u1 /a/u1.wav\nu2 /a/u2.flac\n");
    cr_assert_eq(manifest_read_kaldi_dir(dir, &m, &err), 0, "%s", err.msg);
    cr_assert_eq(m.n, 2);
    manifest_free(&m);
}

/* A Kaldi dir with segments: utterances are spans of recordings, read as such through the
 * dataset block, collect_stats' reader and the decoder's. */
Test(corpora, kaldi_segments_are_spans_of_recordings)
{
    char dir[512], flac[512];
    snprintf(dir, sizeof dir, "%s/kaldi", workdir);
    snprintf(flac, sizeof flac, "%s/rec1.flac", workdir);
    write_flac(flac, 3, 2.0);
    char scp[700];
    snprintf(scp, sizeof scp, "rec1 %s\n", flac);
    test_write_text_mkdirs(test_path(dir, "wav.scp"), scp);
    test_write_text(test_path(dir, "segments"), "a rec1 0.0 0.5\nb rec1 0.5 1.75\nc rec1 1.5 -1\n");
    test_write_text(test_path(dir, "text"), "a ONE\nb TWO\nc THREE\n");
    test_write_text(test_path(dir, "utt2spk"), "a s\nb s\nc s\n");
    manifest m;
    esp_err err;
    cr_assert_eq(manifest_read_kaldi_dir(dir, &m, &err), 0, "%s", err.msg);
    cr_assert_eq(m.n, 3);
    cr_assert_str_eq(m.items[1].utt, "b");
    cr_assert_str_eq(m.items[1].wav, flac);
    cr_assert_float_eq(m.items[1].start, 0.5, 1e-12);
    cr_assert_float_eq(m.items[1].end, 1.75, 1e-12);
    float *x, *whole;
    size_t n, nw;
    cr_assert_eq(audio_read_span(flac, 16000, "fs", 0, m.items[1].start, m.items[1].end, &x, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 20000);
    cr_assert_eq(audio_read(flac, 16000, "fs", &whole, &nw, &err), 0, "%s", err.msg);
    cr_assert_eq(memcmp(x, whole + 8000, n * sizeof *x), 0, "the span is the recording's samples 8000..28000");
    free(x);
    cr_assert_eq(audio_read_span(flac, 16000, "fs", 0, m.items[2].start, m.items[2].end, &x, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, nw - 24000, "end -1: to the end of the recording");
    free(x);
    free(whole);
    cr_assert_eq(audio_read_span(flac, 16000, "fs", 0, 1.0, 3.0, &x, &n, &err), -1);
    cr_assert(strstr(err.msg, "rec1.flac: segment 1.000-3.000 s runs past the end of the audio (2.000 s)"), "%s", err.msg);
    manifest_free(&m);
    /* bad lines name the file and line */
    test_write_text(test_path(dir, "segments"), "a rec1 0.0 0.5\nb rec1 0.9 0.2\n");
    cr_assert_eq(manifest_read_kaldi_dir(dir, &m, &err), -1);
    cr_assert(strstr(err.msg, "kaldi/segments:2: expected '<utt> <recording> <start> <end>'"), "%s", err.msg);
    test_write_text(test_path(dir, "segments"), "a rec2 0.0 0.5\n");
    cr_assert_eq(manifest_read_kaldi_dir(dir, &m, &err), -1);
    cr_assert(strstr(err.msg, "kaldi/segments:1: recording rec2 is not in wav.scp"), "%s", err.msg);
    test_write_text(test_path(dir, "segments"), "a rec1 0.0 0.5\nz rec1 0.5 1.0\n");
    cr_assert_eq(manifest_read_kaldi_dir(dir, &m, &err), -1);
    cr_assert(strstr(err.msg, "kaldi/text: no transcript for utterance z (listed in segments)"), "%s", err.msg);
}

/* dataset.valid as two sources: concatenated in order; a shared id is an error naming both. */
Test(corpora, dataset_sources_concatenate_and_refuse_shared_ids)
{
    make_split(workdir, "dev-clean", 20, 1, 2);
    char data[512], kdir[512];
    snprintf(data, sizeof data, "%s/data", workdir);
    snprintf(kdir, sizeof kdir, "%s/kaldi", workdir);
    test_write_text_mkdirs(test_path(data, "manifest/valid.tsv"), "v1\t/a/v1.wav\tONE\nv2\t/a/v2.wav\tTWO\n");
    test_write_text_mkdirs(test_path(kdir, "wav.scp"), "k1 /a/k1.wav\n");
    test_write_text(test_path(kdir, "text"), "k1 KALDI\n");
    data_src_args_cfg a0 = {.split = "valid"}, a1 = {.path = kdir}, a2 = {.path = workdir, .split = "dev-clean"};
    dataset_ref_cfg refs[3] = {{.data_src_args = &a0}, {.data_src = "kaldi", .data_src_args = &a1},
                               {.data_src = "librispeech", .data_src_args = &a2}};
    manifest m;
    esp_err err;
    cr_assert_eq(dataset_refs_load(refs, 3, &(dataset_read_ctx){.data_dir = data}, "dataset.valid", &m, &err), 0, "%s", err.msg);
    cr_assert_eq(m.n, 5);
    cr_assert_str_eq(m.items[0].utt, "v1");
    cr_assert_str_eq(m.items[2].utt, "k1");
    cr_assert_str_eq(m.items[3].utt, "20-120-0000");
    manifest_free(&m);
    /* the same source twice: every id is shared */
    dataset_ref_cfg twice[2] = {{.data_src_args = &a0}, {.data_src_args = &a0}};
    cr_assert_eq(dataset_refs_load(twice, 2, &(dataset_read_ctx){.data_dir = data}, "dataset.valid", &m, &err), -1);
    cr_assert(strstr(err.msg, "dataset.valid: utterance id v1 is in dataset.valid[0] and dataset.valid[1]"), "%s",
              err.msg);
    /* a split create_dataset did not write */
    data_src_args_cfg a3 = {.split = "nope"};
    dataset_ref_cfg missing = {.data_src_args = &a3};
    cr_assert_eq(dataset_refs_load(&missing, 1, &(dataset_read_ctx){.data_dir = data}, "dataset.train", &m, &err), -1);
    cr_assert(strstr(err.msg, "manifest/nope.tsv: no manifest for split 'nope' (dataset.train[0]"), "%s", err.msg);
    /* an empty list */
    cr_assert_eq(dataset_refs_load(refs, 0, &(dataset_read_ctx){.data_dir = data}, "dataset.train", &m, &err), -1);
    cr_assert(strstr(err.msg, "dataset.train: an empty list"), "%s", err.msg);
}

/* ESPnet3's other spellings of the recipe's own dataset: a tag <recipe>/<task> (the config check has
 * matched it to this recipe) and an older `dataset: {_target_: <class>, split: ...}` entry. */
Test(corpora, dataset_tag_and_legacy_split_read_the_recipe_split)
{
    char data[512];
    snprintf(data, sizeof data, "%s/data", workdir);
    test_write_text_mkdirs(test_path(data, "manifest/test-clean.tsv"), "t1\t/a/t1.wav\tONE\n");
    data_src_args_cfg a = {.split = "test-clean"};
    dataset_legacy_cfg legacy = {.target = "src.dataset.LibriSpeechDataset", .split = "test-clean"};
    dataset_ref_cfg refs[2] = {{.data_src = "librispeech_100/asr", .data_src_args = &a, .name = "a"},
                               {.dataset = &legacy, .name = "b"}};
    for (int i = 0; i < 2; i++) {
        manifest m;
        esp_err err;
        cr_assert_eq(dataset_refs_load(&refs[i], 1, &(dataset_read_ctx){.data_dir = data}, "dataset.test", &m, &err), 0, "%s", err.msg);
        cr_assert_eq(m.n, 1);
        cr_assert_str_eq(m.items[0].utt, "t1");
        manifest_free(&m);
    }
}

/* ESPnet3's mini_an4 recipe from its folder, stages 1-8, on the AN4 archive it ships. */
Test(corpora, mini_an4_recipe_runs_stages_1_to_8_from_espnet3_configs)
{
    int rc = test_sh("cd '%s/recipes/mini_an4' && timeout 120 '%s' --training_config conf/training.yaml "
                     "--inference_config conf/inference.yaml --metrics_config conf/metrics.yaml "
                     "data_dir=%s/data dataset_dir=%s/downloads stats_dir=%s/stats exp_dir=%s/exp "
                     ">%s/run.out 2>%s/run.err",
                     test_root_dir(), test_bin_path(), workdir, workdir, workdir, workdir, workdir, workdir);
    char *log = test_slurp_or_empty(test_path(workdir, "run.err"));
    cr_assert_eq(rc, 0, "%s", log);
    const char *stages[] = {"create_dataset", "train_tokenizer", "collect_stats", "train", "infer", "measure",
                            "pack_model"};
    for (int i = 0; i < 7; i++) {
        char want[64];
        snprintf(want, sizeof want, "=== [DONE] stage: %s (", stages[i]);
        cr_assert(strstr(log, want), "%s missing:\n%s", stages[i], log);
    }
    /* No key is dropped: the augmentation is applied, the tokenizer text is src.tokenizer's (in C here). */
    cr_assert_null(strstr(log, "data_aug_effects: accepted"), "%s", log);
    cr_assert(strstr(log, "waveform augmentation of the training split"), "%s", log);
    cr_assert(strstr(log, "from 4 utterances in src.tokenizer.gather_training_text"), "%s", log);
    /* limit_train_batches: 1 is one batch (Lightning): one step in the only epoch. */
    cr_assert(strstr(log, "train epoch 1 step 1 "), "%s", log);
    cr_assert_null(strstr(log, "step 2 "), "%s", log);
    free(log);
    /* AN4's 5 train utterances: the first (sorted) held out as valid, as ESPnet3's builder. */
    char *train = test_slurp(test_path(workdir, "data/manifest/train.tsv"));
    char *valid = test_slurp(test_path(workdir, "data/manifest/valid.tsv"));
    char *test = test_slurp(test_path(workdir, "data/manifest/test.tsv"));
    cr_assert_eq(test_count_lines(train), 4);
    cr_assert_eq(test_count_lines(valid), 1);
    cr_assert_eq(test_count_lines(test), 2);
    cr_assert(!strncmp(valid, "fash-an251-b\t", 13), "%s", valid);
    cr_assert(strstr(valid, "/an4/wav/an4_clstk/fash/an251-fash-b.sph\tYES\n"), "%s", valid);
    cr_assert(strstr(test, "mmxg-cen8-b\t"), "%s", test);
    free(train), free(valid), free(test);
    /* bpe tokens, the bpe text shape, both test entries decoded under their names, scored. */
    cr_assert(test_exists(test_path(workdir, "data/bpe_30/bpe.model")));
    char *tshape = test_slurp(test_path(workdir, "stats/train/text_shape.bpe"));
    cr_assert_eq(test_count_lines(tshape), 4);
    free(tshape);
    cr_assert(test_exists(test_path(workdir, "exp/inference/valid/hyp.scp")));
    char *ref = test_slurp(test_path(workdir, "exp/inference/test/ref.scp"));
    cr_assert(strstr(ref, "fcaw-cen8-b ELEVEN TWENTY SEVEN FIFTY SEVEN\n"), "%s", ref);
    free(ref);
    char *res = test_slurp(test_path(workdir, "exp/inference/RESULTS.md"));
    cr_assert(strstr(res, "|test|2|10|") && strstr(res, "|valid|1|1|"), "%s", res);
    free(res);
    cr_assert(test_exists(test_path(workdir, "exp/model_pack")));
    cr_assert(test_exists(test_path(workdir, "downloads/an4/LICENSE")));

    /* Another test set from the command line: a Kaldi dir whose segments cut one AN4 SPHERE file. */
    char kdir[512], line[1024];
    snprintf(kdir, sizeof kdir, "%s/kseg", workdir);
    snprintf(line, sizeof line, "rec %s/downloads/an4/wav/an4test_clstk/fcaw/cen8-fcaw-b.sph\n", workdir);
    test_write_text_mkdirs(test_path(kdir, "wav.scp"), line);
    test_write_text(test_path(kdir, "segments"), "s1 rec 0.0 1.2\ns2 rec 1.2 -1\n");
    test_write_text(test_path(kdir, "text"), "s1 ELEVEN TWENTY\ns2 SEVEN FIFTY SEVEN\n");
    rc = test_sh("cd '%s/recipes/mini_an4' && timeout 120 '%s' --training_config conf/training.yaml "
                 "--inference_config conf/inference.yaml --stages infer data_dir=%s/data stats_dir=%s/stats "
                 "exp_dir=%s/exp 'dataset.test=[{name: kseg, data_src: kaldi, data_src_args: {path: %s}}]' "
                 ">%s/seg.out 2>%s/seg.err",
                 test_root_dir(), test_bin_path(), workdir, workdir, workdir, kdir, workdir, workdir);
    log = test_slurp_or_empty(test_path(workdir, "seg.err"));
    cr_assert_eq(rc, 0, "%s", log);
    cr_assert(strstr(log, "infer: kseg: 2 utterances, "), "%s", log);
    free(log);
    char *hyp = test_slurp(test_path(workdir, "exp/inference/kseg/hyp.scp"));
    cr_assert_eq(test_count_lines(hyp), 2, "%s", hyp);
    free(hyp);
    ref = test_slurp(test_path(workdir, "exp/inference/kseg/ref.scp"));
    cr_assert_str_eq(ref, "s1 ELEVEN TWENTY\ns2 SEVEN FIFTY SEVEN\n");
    free(ref);
}

/* speed_perturb_factors with the dataset: block: the copies come from the original training set
 * (the tokenizer reads that one too), the train split is the perturbed list, valid is not. */
Test(corpora, speed_perturbation_of_a_dataset_block_train_split)
{
    int rc = test_sh("cd '%s/recipes/mini_an4' && timeout 120 '%s' --training_config conf/training.yaml "
                     "--stage 1 --stop_stage 5 data_dir=%s/data dataset_dir=%s/downloads stats_dir=%s/stats "
                     "exp_dir=%s/exp '+speed_perturb_factors=[0.9, 1.0, 1.1]' >%s/run.out 2>%s/run.err",
                     test_root_dir(), test_bin_path(), workdir, workdir, workdir, workdir, workdir, workdir);
    char *log = test_slurp_or_empty(test_path(workdir, "run.err"));
    cr_assert_eq(rc, 0, "%s", log);
    cr_assert(strstr(log, "speed perturbation: 4 training utterances -> 12 in"), "%s", log);
    free(log);
    char *sp = test_slurp(test_path(workdir, "data/manifest/train_sp.tsv"));
    cr_assert_eq(test_count_lines(sp), 12);
    cr_assert(strstr(sp, "sp0.9-") && strstr(sp, "sp1.1-"), "%s", sp);
    free(sp);
    char *tshape = test_slurp(test_path(workdir, "stats/train/feats_shape"));
    char *vshape = test_slurp(test_path(workdir, "stats/valid/feats_shape"));
    cr_assert_eq(test_count_lines(tshape), 12);
    cr_assert_eq(test_count_lines(vshape), 1);
    free(tshape);
    free(vshape);
}

/* ESPnet3's librispeech_100 configs on a miniature LibriSpeech tree (FLAC): the recipe's
 * E-Branchformer and decoder, shrunk to a tiny width. */
Test(corpora, librispeech_100_recipe_runs_on_a_miniature_tree)
{
    char root[512];
    snprintf(root, sizeof root, "%s/ls", workdir);
    make_librispeech(root);
    int rc = test_sh(
        "cd '%s/recipes/librispeech_100' && timeout 300 '%s' --training_config conf/training.yaml "
        "--inference_config conf/inference.yaml --metrics_config conf/metrics.yaml "
        "data_dir=%s/data dataset_dir=%s stats_dir=%s/stats exp_dir=%s/exp "
        "tokenizer.vocab_size=24 model.encoder_conf.output_size=16 model.encoder_conf.attention_heads=2 "
        "model.encoder_conf.cgmlp_linear_units=16 model.encoder_conf.cgmlp_conv_kernel=3 "
        "model.encoder_conf.linear_units=16 model.encoder_conf.num_blocks=1 model.encoder_conf.merge_conv_kernel=3 "
        "model.decoder_conf.linear_units=16 model.decoder_conf.num_blocks=1 model.decoder_conf.attention_heads=2 "
        "trainer.precision=32 trainer.max_epochs=1 "
        "trainer.accumulate_grad_batches=1 dataloader.train.iter_factory.batches.batch_bins=20000 "
        "dataloader.train.iter_factory.num_workers=0 model.beam_size=2 "
        /* one epoch averages 1 checkpoint (valid.acc.ave_1best, as ESPnet2 names it), not the 10 the
         * config names: take the average's link */
        "'model.asr_model_file=${exp_dir}/valid.acc.ave.pth' "
        ">%s/run.out 2>%s/run.err",
        test_root_dir(), test_bin_path(), workdir, root, workdir, workdir, workdir, workdir);
    char *log = test_slurp_or_empty(test_path(workdir, "run.err"));
    cr_assert_eq(rc, 0, "%s", log);
    cr_assert(strstr(log, "=== [DONE] stage: pack_model ("), "%s", log);
    free(log);
    const char *splits[] = {"train-clean-100", "dev-clean", "dev-other", "test-clean", "test-other"};
    const int sizes[] = {12, 2, 2, 2, 2};
    for (int i = 0; i < 5; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "data/manifest/%s.tsv", splits[i]);
        char *m = test_slurp(test_path(workdir, rel));
        cr_assert_eq(test_count_lines(m), sizes[i], "%s", splits[i]);
        free(m);
        if (i == 0) continue;
        snprintf(rel, sizeof rel, "exp/inference/%s/hyp.scp", splits[i]);
        cr_assert(test_exists(test_path(workdir, rel)), "%s", rel);
    }
    /* valid = dev-clean + dev-other: 4 shapes */
    char *vshape = test_slurp(test_path(workdir, "stats/valid/feats_shape"));
    cr_assert_eq(test_count_lines(vshape), 4);
    free(vshape);
    char *res = test_slurp(test_path(workdir, "exp/inference/RESULTS.md"));
    cr_assert(strstr(res, "|dev-clean|2|") && strstr(res, "|test-other|2|"), "%s", res);
    free(res);
}

Test(corpora, librispeech_100_says_which_splits_are_missing)
{
    char root[512];
    snprintf(root, sizeof root, "%s/ls", workdir);
    make_split(root, "train-clean-100", 10, 1, 1);
    make_split(root, "dev-clean", 20, 1, 1);
    int rc = test_sh("cd '%s/recipes/librispeech_100' && '%s' --training_config conf/training.yaml --stages "
                     "create_dataset data_dir=%s/data dataset_dir=%s model.encoder=conformer '~model.encoder_conf' "
                     ">%s/run.out 2>%s/run.err",
                     test_root_dir(), test_bin_path(), workdir, root, workdir, workdir);
    char *log = test_slurp_or_empty(test_path(workdir, "run.err"));
    cr_assert_eq(rc, 1, "%d %s", rc, log);
    cr_assert(strstr(log, "LibriSpeech is incomplete: missing dev-other, test-clean, test-other"), "%s", log);
    cr_assert(!test_exists(test_path(workdir, "data/manifest")), "nothing written");
    free(log);
}

/* dataset.preprocessor.fs is mapped to the frontend's rate: another value is an error naming both. */
Test(corpora, preprocessor_fs_must_match_the_frontend)
{
    int rc = test_sh("cd '%s/recipes/mini_an4' && '%s' --training_config conf/training.yaml --stages collect_stats "
                     "data_dir=%s/data stats_dir=%s/stats dataset.preprocessor.fs=8000 >%s/run.out 2>%s/run.err",
                     test_root_dir(), test_bin_path(), workdir, workdir, workdir, workdir);
    char *log = test_slurp_or_empty(test_path(workdir, "run.err"));
    cr_assert_eq(rc, 1, "%d %s", rc, log);
    cr_assert(strstr(log, "conf/training.yaml: dataset.preprocessor.fs is 8000 but model.frontend_conf.fs is 16000"),
              "%s", log);
    cr_assert(!test_exists(test_path(workdir, "stats/train")), "no statistics written");
    free(log);
}
