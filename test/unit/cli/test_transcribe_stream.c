/* `espnet3 transcribe --stream` through the binary, on the streaming fixture (a contextual block
 * model trained by ESPnet, test/fixtures/stream_decode/): WAVs written into its standard input in
 * pieces of random sizes (with pauses) end in the text ESPnet's Speech2TextStreaming gives them,
 * as raw PCM too; JSON lines carry the partials' times; bad streams are one error line each; an
 * asr_transducer pack with streaming: true ends in the text of ESPnet2's streaming_decode, one with
 * causal convolutions (dynamic chunk training) too. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/data/audio.h"
#include "test/unit/test_util.h"

static char dir[64], *out, *err;

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "transcribe_stream"); }

static void teardown(void)
{
    free(out), free(err);
    out = err = NULL;
    test_tmpdir_remove(dir);
}

TestSuite(transcribe_stream, .init = setup, .fini = teardown);

static const char *fx(const char *rel)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/test/fixtures/stream_decode/%s", test_root_dir(), rel);
    return p[k];
}

/* ESPnet's text of its one-call decode of utt (calls.txt's "whole" line at ctc_weight 0.3): the
 * fixture's char tokens, id 2 <space>, 3.. the letters A-E. */
static void espnet_text(const char *utt, char *text, size_t cap)
{
    char *calls = test_slurp(fx("calls.txt")), *save = NULL, pat[64];
    snprintf(pat, sizeof pat, "%s 0.3 whole ", utt);
    size_t k = 0;
    for (char *line = strtok_r(calls, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, pat, strlen(pat))) continue;
        char *q = line + strlen(pat);
        for (int skip = 0; skip < 3; skip++) q = strchr(q, ' ') + 1; /* samples, final, blocks */
        for (char *end; *q != '|'; q = end) {
            long id = strtol(q, &end, 10);
            cr_assert(end != q && k + 1 < cap, "%s", line);
            text[k++] = id == 2 ? ' ' : (char)('A' + id - 3);
        }
    }
    text[k] = '\0';
    free(calls);
    cr_assert_gt(k, 0, "no whole line for %s", utt);
}

/* Runs `espnet3 transcribe MODEL - --stream ARGS` with bytes written into its stdin in pieces of
 * 1..max_piece bytes (seeded), pausing now and then; out and err get its stdout and stderr. */
static int stream_bytes(const unsigned char *bytes, size_t n, unsigned seed, size_t max_piece, const char *model,
                        const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' transcribe -q '%s' - --stream --beam 4 --ctc_weight 0.3 %s >'%s/out' "
             "2>'%s/err'", test_bin_path(), model, args, dir, dir);
    FILE *p = popen(cmd, "w");
    cr_assert_not_null(p);
    srand(seed);
    for (size_t at = 0; at < n;) {
        size_t piece = 1 + (size_t)rand() % max_piece;
        if (piece > n - at) piece = n - at;
        cr_assert_eq(fwrite(bytes + at, 1, piece, p), piece);
        fflush(p);
        if (rand() % 8 == 0) usleep(2000);
        at += piece;
    }
    int rc = pclose(p);
    free(out), free(err);
    out = test_slurp(test_path(dir, "out"));
    err = test_slurp(test_path(dir, "err"));
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static const char *model(void) { return fx("espnet_model/exp/asr_train"); }

/* The last line of out. */
static const char *last_line(void)
{
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '\n') out[--n] = '\0';
    const char *nl = strrchr(out, '\n');
    return nl ? nl + 1 : out;
}

Test(transcribe_stream, a_wav_in_random_pieces_ends_in_espnets_text)
{
    const char *utts[] = {"utt1", "utt2"};
    for (int u = 0; u < 2; u++) {
        char rel[64], want[256], line[300];
        snprintf(rel, sizeof rel, "wav/%s.wav", utts[u]);
        espnet_text(utts[u], want, sizeof want);
        snprintf(line, sizeof line, "final\t%s", want);
        size_t n;
        unsigned char *wav = (unsigned char *)read_file(fx(rel), READ_LIST, &n, &(esp_err){{0}});
        cr_assert_not_null(wav);
        for (unsigned seed = 1; seed <= 2; seed++) {
            cr_assert_eq(stream_bytes(wav, n, seed * 7 + (unsigned)u, seed == 1 ? 3000 : 97, model(), ""), 0, "%s",
                         err);
            cr_expect_str_eq(last_line(), line, "%s seed %u:\n%s", utts[u], seed, out);
            cr_expect(strstr(out, "partial\t") != NULL, "%s: no partial result:\n%s", utts[u], out);
        }
        /* Raw samples (the data chunk alone) and a file argument give the same. */
        cr_assert_eq(stream_bytes(wav + 44, n - 44, 5, 500, model(), ""), 0, "%s", err);
        cr_expect_str_eq(last_line(), line, "%s raw:\n%s", utts[u], out);
        free(wav);
    }
}

/* Partial lines of out. */
static int partial_lines(void)
{
    int n = 0;
    for (const char *q = out; (q = strstr(q, "partial\t")); q++) n++;
    return n;
}

/* Without the repetition check the search goes on within each block: more partial results, which
 * run further into the utterance. */
Test(transcribe_stream, no_repetition_check_runs_each_block_on)
{
    size_t n;
    unsigned char *wav = (unsigned char *)read_file(fx("wav/utt2.wav"), READ_LIST, &n, &(esp_err){{0}});
    cr_assert_not_null(wav);
    cr_assert_eq(stream_bytes(wav, n, 3, 2000, model(), ""), 0, "%s", err);
    int with = partial_lines();
    cr_assert_eq(stream_bytes(wav, n, 3, 2000, model(), "--stream_no_repetition_check"), 0, "%s", err);
    free(wav);
    cr_expect_gt(partial_lines(), with, "%d partial lines with the check, without:\n%s", with, out);
    cr_expect(strncmp(last_line(), "final\t", 6) == 0 && strlen(last_line()) > 12, "%s", out);
}

Test(transcribe_stream, json_lines_carry_the_times)
{
    size_t n;
    unsigned char *wav = (unsigned char *)read_file(fx("wav/utt2.wav"), READ_LIST, &n, &(esp_err){{0}});
    cr_assert_not_null(wav);
    cr_assert_eq(stream_bytes(wav, n, 3, 2000, model(), "-o json"), 0, "%s", err);
    free(wav);
    int partials = 0, finals = 0;
    char *save = NULL;
    double last_audio = 0;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        json_error_t je;
        json_t *j = json_loads(l, 0, &je);
        cr_assert_not_null(j, "%s: %s", l, je.text);
        const char *type = json_string_value(json_object_get(j, "type"));
        double audio = json_real_value(json_object_get(j, "audio_s")), dec = json_real_value(json_object_get(j, "decoded_s"));
        double wall = json_real_value(json_object_get(j, "wall_s")), push = json_real_value(json_object_get(j, "push_s"));
        cr_assert_not_null(type);
        cr_expect(audio >= last_audio && dec <= audio + 0.1 && wall >= push && push >= 0, "%s", l);
        last_audio = audio;
        partials += !strcmp(type, "partial"), finals += !strcmp(type, "final");
        json_decref(j);
    }
    cr_expect_gt(partials, 0);
    cr_expect_eq(finals, 1);
    cr_expect_eq((long)(last_audio * 16000 + 0.5), 47680, "the final line holds the whole WAV's audio");
}

Test(transcribe_stream, bad_streams_are_one_error_line)
{
    /* 8 kHz and stereo WAVs; a header cut short; a model without the contextual encoder. */
    static const float x[800] = {0};
    char p8[600];
    snprintf(p8, sizeof p8, "%s/8k.wav", dir);
    esp_err e;
    cr_assert_eq(audio_write_wav16(p8, x, 800, 8000, AUDIO_PCM16_EXACT, &e), 0, "%s", e.msg);
    size_t n;
    unsigned char *w = (unsigned char *)read_file(p8, READ_LIST, &n, &e);
    cr_assert_not_null(w);
    cr_expect_eq(stream_bytes(w, n, 1, 100, model(), ""), 1);
    cr_expect(strstr(err, "espnet3: error: <stdin>: 8000 Hz audio, the model takes 16000 Hz") == err, "%s", err);
    cr_expect_eq(test_count_lines(err), 1, "%s", err);
    w[22] = 2; /* channels */
    cr_expect_eq(stream_bytes(w, n, 1, 100, model(), ""), 1);
    cr_expect(strstr(err, "<stdin>: WAV has more than one channel") != NULL, "%s", err);
    cr_expect_eq(stream_bytes(w, 30, 1, 100, model(), ""), 1);
    cr_expect(strstr(err, "ended inside its WAV header") != NULL, "%s", err);
    free(w);
    char other[600];
    snprintf(other, sizeof other, "%s/test/fixtures/interop/espnet_model/exp/asr_train", test_root_dir());
    cr_expect_eq(stream_bytes((const unsigned char *)"\0\0", 2, 1, 2, other, ""), 1);
    cr_expect(strstr(err, "espnet3: error: --stream: streaming decoding needs a model with encoder "
                          "contextual_block_transformer") == err, "%s", err);
}

/* A pack whose conf/inference.yaml names test/fixtures/asr_transducer_stream/<model>'s files with
 * asr_transducer_inference's streaming (beam 3, search, decoding_window ms, left_context: one
 * decoding of <model>_results.txt); pack and wav get its folder and the fixture WAV. */
static void transducer_pack(const char *model, const char *search, const char *streaming, int window, int left,
                            char *pack, char *wav)
{
    char fxd[600], conf[700], yaml[2048];
    snprintf(fxd, sizeof fxd, "%s/test/fixtures/asr_transducer_stream", test_root_dir());
    snprintf(conf, sizeof conf, "%s/pack/conf", dir);
    cr_assert_eq(test_sh("mkdir -p '%s'", conf), 0);
    snprintf(yaml, sizeof yaml,
             "model:\n  _target_: espnet2.bin.asr_transducer_inference.Speech2Text\n"
             "  asr_train_config: %s/%s/config.yaml\n  asr_model_file: %s/%s/valid.acc.ave.pth\n"
             "  beam_size: 3\n  beam_search_config:\n    search_type: %s\n  streaming: %s\n  decoding_window: %d\n"
             "  left_context: %d\n",
             fxd, model, fxd, model, search, streaming, window, left);
    snprintf(conf, sizeof conf, "%s/pack/conf/inference.yaml", dir);
    test_write_text(conf, yaml);
    snprintf(pack, 600, "%s/pack", dir);
    snprintf(wav, 700, "%s/utt.wav", fxd);
}

/* The WAV written in random pieces into --stream (seed 1: up to 5000 bytes, seed 2: up to 301)
 * ends in want, with partial lines before. */
static void expect_stream_ends_in(const char *pack, const char *wavp, const char *want)
{
    size_t n;
    unsigned char *wav = (unsigned char *)read_file(wavp, READ_LIST, &n, &(esp_err){{0}});
    cr_assert_not_null(wav);
    for (unsigned seed = 1; seed <= 2; seed++) {
        cr_assert_eq(stream_bytes(wav, n, seed, seed == 1 ? 5000 : 301, pack, "--beam 3"), 0, "%s", err);
        char line[256];
        snprintf(line, sizeof line, "final\t%s", want);
        cr_expect_str_eq(last_line(), line, "seed %u:\n%s", seed, out);
        cr_expect(strstr(out, "partial\t") != NULL, "no partial result:\n%s", out);
    }
    free(wav);
}

/* An asr_transducer model with asr_transducer_inference's streaming: true (the conformer model, tsd,
 * 320 ms, left_context 8):
 * the WAV in random pieces through --stream, and the file decoded at once (chunk by chunk, as the
 * inference config says), end in the text of ESPnet2's streaming_decode (conformer_results.txt: 16
 * x 'a'); without streaming the offline decode differs. */
Test(transcribe_stream, asr_transducer_streaming_pack_ends_in_espnets_text)
{
    char pack[600], wavp[700];
    transducer_pack("conformer", "tsd", "true", 320, 8, pack, wavp);
    const char *want = "aaaaaaaaaaaaaaaa";
    expect_stream_ends_in(pack, wavp, want);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' transcribe -q '%s' '%s' >'%s/out' 2>'%s/err'", test_bin_path(), pack, wavp, dir, dir);
    cr_assert_eq(system(cmd), 0);
    free(out);
    out = test_slurp(test_path(dir, "out"));
    cr_expect_str_eq(last_line(), want, "the file at once, streaming: true:\n%s", out);
    transducer_pack("conformer", "tsd", "false", 320, 8, pack, wavp);
    cr_assert_eq(system(cmd), 0);
    free(out);
    out = test_slurp(test_path(dir, "out"));
    cr_expect_str_neq(last_line(), want, "the offline decode of this model differs from the chunked one:\n%s", out);
}

/* A model trained with main_conf.dynamic_chunk_training (causal convolutions, whose chunks carry
 * their last inputs; the causal model: conformer, ebranchformer and branchformer blocks; maes, 480
 * ms, left_context 4): --stream ends in ESPnet2's text, causal_results.txt's maes line. (Its
 * per-call hypotheses and scores against ESPnet2's, which tell the caches' loss, are
 * test_asr_transducer_stream.c's.) */
Test(transcribe_stream, causal_convolutions_pack_ends_in_espnets_text)
{
    char pack[600], wavp[700];
    transducer_pack("causal", "maes", "true", 480, 4, pack, wavp);
    expect_stream_ends_in(pack, wavp, "gggggggggggggggggggggggggggggggggggggggggggghhhhggghgggg"
                                      "gggggggggggggggggggggggggggggggggggggggggggggggggggggggg");
}
