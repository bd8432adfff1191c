/* Streaming decoding against ESPnet's Speech2TextStreaming (scripts/make_stream_decode_fixtures.py,
 * ESPnet 202511): a tiny contextual block Transformer model trained by ESPnet, two WAVs pushed in
 * the chunks ESPnet was fed (the first shorter than a window), beam 4, ctc_weight 0.3 and 0.5, and
 * 0.3 with disable_repetition_detection; and the same calls (0.3, 0.5) of a tiny contextual block
 * Conformer model (stream_decode_conformer/).
 * Per call: the same returned hypothesis, the same best running hypothesis, the same blocks
 * searched; the final results, and the WAV in one final push. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend_cpu.h"
#include "core/data/audio.h"
#include "core/decode/speech2text.h"
#include "core/decode/speech2text_stream.h"
#include "core/nn/model_files.h"
#include "test/unit/test_util.h"

static const char *model_dir = "stream_decode"; /* the model's fixture folder (the WAVs: stream_decode's) */

static const char *fx(const char *rel)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/test/fixtures/%s/%s", test_root_dir(),
             strncmp(rel, "wav/", 4) ? model_dir : "stream_decode", rel);
    return p[k];
}

/* The text of a fixture's id list ("-": none). */
static char *ids_text(const speech2text *s, const char *list)
{
    int ids[256], n = 0;
    char *end;
    for (const char *q = list; strcmp(list, "-") && n < 256; q = end) {
        long v = strtol(q, &end, 10);
        if (end == q) break;
        ids[n++] = (int)v;
    }
    return speech2text_text(s, ids, (size_t)n);
}

typedef struct opened {
    backend be;
    model_files mf;
    speech2text *s;
    s2t_stream *st;
} opened;

static void open_model(opened *o, double ctc_weight)
{
    char cfg[600], pth[600];
    snprintf(cfg, sizeof cfg, "%s", fx("espnet_model/exp/asr_train/config.yaml"));
    snprintf(pth, sizeof pth, "%s", fx("espnet_model/exp/asr_train/valid.acc.ave.pth"));
    infer_model_cfg mc = {.asr_train_config = cfg, .asr_model_file = pth, .beam_size = 4, .ctc_weight = ctc_weight,
                          .nbest = 1};
    inference_cfg ic = {.model = &mc};
    esp_err err = {{0}};
    cr_assert_eq(model_files_locate(&o->mf, &ic, "inference.yaml", &err), 0, "%s", err.msg);
    cr_assert_eq(backend_cpu_init(&o->be, 1, &err), 0, "%s", err.msg);
    s2t_opts so = {.beam_size = 4, .ctc_weight = ctc_weight, .nbest = 1};
    o->s = speech2text_open(&o->be, &o->mf, &so, &err);
    cr_assert_not_null(o->s, "%s", err.msg);
    o->st = s2t_stream_open(o->s, &err);
    cr_assert_not_null(o->st, "%s", err.msg);
}

static void close_model(opened *o)
{
    s2t_stream_close(o->st);
    speech2text_close(o->s);
    o->be.destroy(&o->be);
    model_files_free(&o->mf);
}

/* Every call of a calls file: returns the calls compared, the final ones with a text in *finals,
 * the partial ones with a text (ESPnet's result before the final push) in *partials. */
static int compare_calls(const char *file, int repetition_check, int *finals, int *partials)
{
    char *calls = test_slurp(fx(file));
    int checked = 0, partial_blocks = 0, running = 0;
    *finals = *partials = 0;
    for (int w = 0; w < 2; w++) {
        double cw = w ? 0.5 : 0.3;
        opened o;
        open_model(&o, cw);
        s2t_stream_set_repetition_check(o.st, repetition_check);
        char utt_now[32] = "";
        float *wav = NULL;
        size_t n = 0, at = 0;
        char *copy = strdup(calls), *save = NULL;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char utt[32], call[16], rest[2048];
            double lw;
            long samples;
            int final, blocks;
            cr_assert_eq(sscanf(line, "%31s %lf %15s %ld %d %d %2047[^\n]", utt, &lw, call, &samples, &final, &blocks,
                                rest), 7, "%s", line);
            if ((int)(lw * 10 + 0.5) != (int)(cw * 10 + 0.5)) continue;
            if (strcmp(utt, utt_now)) {
                free(wav);
                char rel[64];
                snprintf(rel, sizeof rel, "wav/%s.wav", utt);
                esp_err err = {{0}};
                cr_assert_eq(audio_read(fx(rel), 16000, "fs", &wav, &n, &err), 0, "%s", err.msg);
                snprintf(utt_now, sizeof utt_now, "%s", utt);
                at = 0;
            }
            char *bar = strchr(rest, '|');
            cr_assert_not_null(bar);
            *bar = '\0';
            char *want = ids_text(o.s, rest), *want_run = ids_text(o.s, bar + 1);
            int whole = !strcmp(call, "whole");
            if (whole) at = 0;
            cr_assert_leq(at + (size_t)samples, n, "%s", line);
            s2t_partial p;
            esp_err err = {{0}};
            int rc = s2t_stream_push(o.st, wav + at, (size_t)samples, final, &p, &err);
            cr_assert_geq(rc, 0, "%s: %s", line, err.msg);
            at += (size_t)samples;
            cr_expect_str_eq(p.text, want, "ctc_weight %.1f %s call %s: text '%s', ESPnet '%s'", cw, utt, call, p.text,
                             want);
            cr_expect_str_eq(p.running, want_run, "ctc_weight %.1f %s call %s: running '%s', ESPnet '%s'", cw, utt,
                             call, p.running, want_run);
            if (!final) {
                int want_frames = blocks ? 24 + 16 * (blocks - 1) : 0;
                cr_expect_eq(p.frames, want_frames, "%s call %s: frames %d, ESPnet's blocks %d", utt, call, p.frames,
                             blocks);
                partial_blocks += blocks > 0;
                running += p.running[0] != '\0';
                *partials += p.text[0] != '\0';
            }
            *finals += final && want[0] != '\0';
            checked++;
            free(want), free(want_run);
        }
        free(copy);
        free(wav);
        close_model(&o);
    }
    free(calls);
    cr_assert_gt(partial_blocks, 0);
    cr_assert_gt(running, 0);
    return checked;
}

Test(stream_decode, espnet_calls_chunk_by_chunk)
{
    int finals, partials;
    cr_assert_eq(compare_calls("calls.txt", 1, &finals, &partials), 66);
    cr_assert_eq(finals, 8, "every final call (chunked and whole) has a text: %d", finals);
}

Test(stream_decode, conformer_espnet_calls_chunk_by_chunk)
{
    int finals, partials;
    model_dir = "stream_decode_conformer";
    cr_assert_eq(compare_calls("calls.txt", 1, &finals, &partials), 66);
    cr_assert_eq(finals, 8, "every final call (chunked and whole) has a text: %d", finals);
}

/* ESPnet's disable_repetition_detection: blocks search on, and hypotheses end before the final push. */
Test(stream_decode, espnet_calls_without_the_repetition_check)
{
    int finals, partials;
    cr_assert_eq(compare_calls("calls_norep.txt", 0, &finals, &partials), 35);
    cr_assert_eq(finals, 4);
    cr_assert_gt(partials, 0, "ESPnet returns ended hypotheses before the final push here");
}

/* Pushes of 0.1 s (what `espnet3 transcribe --stream` makes) end in the text ESPnet gives the WAV
 * in one call: with global_mvn and a first push longer than a window, the features, the encoder
 * output and the search's blocks do not depend on how the audio was cut. */
Test(stream_decode, pushes_of_a_tenth_give_espnets_whole_text)
{
    char *calls = test_slurp(fx("calls.txt"));
    int checked = 0;
    for (int w = 0; w < 2; w++) {
        double cw = w ? 0.5 : 0.3;
        opened o;
        open_model(&o, cw);
        char *copy = strdup(calls), *save = NULL;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char utt[32], rest[2048], rel[64];
            double lw;
            if (sscanf(line, "%31s %lf whole %*d %*d %*d %2047[^\n]", utt, &lw, rest) != 3 ||
                (int)(lw * 10 + 0.5) != (int)(cw * 10 + 0.5))
                continue;
            *strchr(rest, '|') = '\0';
            char *want = ids_text(o.s, rest);
            float *wav;
            size_t n;
            esp_err err = {{0}};
            snprintf(rel, sizeof rel, "wav/%s.wav", utt);
            cr_assert_eq(audio_read(fx(rel), 16000, "fs", &wav, &n, &err), 0, "%s", err.msg);
            s2t_partial p = {0};
            for (size_t at = 0; at < n; at += 1600) {
                int final = at + 1600 >= n;
                cr_assert_geq(s2t_stream_push(o.st, wav + at, final ? n - at : 1600, final, &p, &err), 0, "%s",
                              err.msg);
            }
            cr_expect_str_eq(p.text, want, "ctc_weight %.1f %s: '%s', ESPnet's whole '%s'", cw, utt, p.text, want);
            checked++;
            free(want), free(wav);
        }
        free(copy);
        close_model(&o);
    }
    free(calls);
    cr_assert_eq(checked, 4);
}
