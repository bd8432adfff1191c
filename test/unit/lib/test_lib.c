/* libespnet3 (include/espnet3.h): the shared library exports the header's functions and nothing
 * else; the example program, linked against the shared and the static library, transcribes to
 * ESPnet's hypotheses; in process, a buffer decodes as its file does, at another rate too, and
 * errors are strings of the calling thread. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/audio.h"
#include "include/espnet3.h"
#include "test/unit/cli/transcribe_fixture.h"
#include "test/unit/test_util.h"

static tr_fixture fx;

static void setup(void) { tr_fixture_make(&fx); }
static void teardown(void) { tr_fixture_free(&fx); }

TestSuite(lib, .init = setup, .fini = teardown);

/* <folder of the binary under test>/<rel>: the library and examples sit beside build/espnet3. */
static const char *built(const char *rel)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s", test_bin_path());
    char *slash = strrchr(p, '/');
    cr_assert_not_null(slash);
    snprintf(slash + 1, sizeof p - (size_t)(slash + 1 - p), "%s", rel);
    cr_assert(test_exists(p), "%s is not built (make %s, which make check does)", p, rel);
    return p;
}

Test(lib, the_shared_library_exports_the_header_and_nothing_else)
{
    /* the functions the header declares, and the dynamic symbols the library defines */
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "grep -o 'espnet3_[a-z_]*(' '%s/include/espnet3.h' | tr -d '(' | sort -u >'%s/declared' && "
             "nm -D --defined-only '%s' | awk '{print $3}' | grep -v '^ESPNET3_1$' | sed 's/@@ESPNET3_1$//' | sort "
             ">'%s/exported' && nm -D --defined-only '%s' | grep -c '@@ESPNET3_1$' >'%s/versioned'",
             test_root_dir(), fx.dir, built("libespnet3.so"), fx.dir, built("libespnet3.so"), fx.dir);
    cr_assert_eq(test_sh("%s", cmd), 0);
    char *declared = test_slurp(test_path(fx.dir, "declared")), *exported = test_slurp(test_path(fx.dir, "exported"));
    int n = test_count_lines(declared);
    cr_expect(n >= 15 && n <= 24, "%d functions (the interface stays small: ~20)", n);
    cr_expect_str_eq(exported, declared);
    char *versioned = test_slurp(test_path(fx.dir, "versioned"));
    cr_expect_eq(atoi(versioned), n, "each under the version node ESPNET3_1");
    free(declared), free(exported), free(versioned);
}

Test(lib, the_example_links_shared_and_static_and_transcribes)
{
    char want[2048] = "";
    for (int i = 0; i < 3; i++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s\t%s\n", fx.wav[i], fx.text[i]);
    const char *progs[2] = {"examples/transcribe", "examples/transcribe_static"};
    for (int k = 0; k < 2; k++) {
        /* the example's own beam (4) and the pack's ctc_weight 0.3: ESPnet's beam-4 hypotheses */
        cr_assert_eq(test_sh("'%s' '%s' '%s' '%s' '%s' >'%s/out' 2>'%s/err'", built(progs[k]), fx.pack, fx.wav[0],
                             fx.wav[1], fx.wav[2], fx.dir, fx.dir),
                     0, "%s: %s", progs[k], test_slurp_or_empty(test_path(fx.dir, "err")));
        char *out = test_slurp(test_path(fx.dir, "out"));
        char *text_lines = calloc(1, strlen(out) + 1);
        for (char *p = out, *q = text_lines; *p;) { /* the word lines start with blanks */
            size_t len = strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0);
            if (*p != ' ') memcpy(q, p, len), q += len;
            p += len;
        }
        cr_expect_str_eq(text_lines, want, "%s", progs[k]);
        free(out), free(text_lines);
    }
    /* a model whose training config names its recipe's create_dataset keys (espeak_fortunes' seed,
     * num_train, ...): the library knows the recipes' keys as the CLI does */
    char synth[1024];
    snprintf(synth, sizeof synth, "%s/test/fixtures/synth_model", test_root_dir());
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(test_sh("'%s' '%s' '%s/speech/synth00.flac' >'%s/out' 2>'%s/err'", built(progs[k]), synth, synth,
                             fx.dir, fx.dir),
                     0, "%s: %s", progs[k], test_slurp_or_empty(test_path(fx.dir, "err")));
        char *out = test_slurp(test_path(fx.dir, "out"));
        cr_expect(strstr(out, "synth00.flac\t"), "%s", out);
        free(out);
    }
    cr_assert_eq(test_sh("'%s' nosuch '%s' 2>'%s/err'", built(progs[0]), fx.wav[0], fx.dir), 1 << 8 >> 8);
    char *e = test_slurp(test_path(fx.dir, "err"));
    cr_expect(strstr(e, "error: nosuch: no such model"), "%s", e);
    free(e);
}

static void *other_thread(void *arg)
{
    (void)arg;
    return (void *)espnet3_last_error();
}

Test(lib, buffers_rates_options_and_errors_in_process)
{
    cr_assert_eq(espnet3_api_version(), ESPNET3_API_VERSION);
    espnet3_options *o = espnet3_options_new();
    cr_expect_eq(espnet3_options_set(o, "beam", "0"), -1);
    cr_expect_str_eq(espnet3_last_error(), "beam '0': use 1 to 10000");
    cr_expect_eq(espnet3_options_set(o, "color", "red"), -1);
    cr_expect(strstr(espnet3_last_error(), "option 'color': unknown"), "%s", espnet3_last_error());
    cr_expect_eq(espnet3_options_set(o, "nbest", "2"), 0);
    cr_assert_null(espnet3_open(test_path(fx.dir, "nosuch"), o));
    cr_expect(strstr(espnet3_last_error(), "nosuch: no such model"), "%s", espnet3_last_error());
    pthread_t t;
    void *seen;
    cr_assert_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, &seen);
    cr_expect_str_eq((const char *)seen, "", "another thread's error is its own");
    espnet3_model *m = espnet3_open(fx.pack, o);
    espnet3_options_free(o);
    cr_assert_not_null(m, "%s", espnet3_last_error());
    cr_expect_eq(espnet3_sample_rate(m), 16000);
    float *x;
    size_t n;
    int fs;
    esp_err e;
    cr_assert_eq(audio_read_fs(fx.wav[1], 0, NULL, &x, &n, &fs, &e), 0, "%s", e.msg);
    espnet3_result *r = espnet3_transcribe(m, x, n, fs);
    cr_assert_not_null(r, "%s", espnet3_last_error());
    cr_expect_str_eq(espnet3_result_text(r, 0), fx.text[1]);
    cr_expect_eq(espnet3_result_count(r), 2, "nbest 2");
    size_t n_ids = 1;
    for (const char *c = fx.ids[1]; *c; c++) n_ids += *c == ' ';
    cr_expect_eq(espnet3_result_tokens(r, 0), n_ids, "%s", fx.ids[1]);
    espnet3_item it;
    cr_expect_eq(espnet3_result_token(r, 0, 0, &it), 0);
    cr_expect(it.id == atoi(fx.ids[1]) && strlen(it.text) == 1, "%d %s", it.id, it.text);
    cr_expect(it.start >= 0 && it.end > it.start && it.score <= 0, "%g %g %g", it.start, it.end, it.score);
    cr_expect_eq(espnet3_result_token(r, 0, 99, &it), -1);
    cr_expect_eq(espnet3_result_words(r, 0), 1);
    cr_expect(espnet3_result_word(r, 0, 0, &it) == 0 && !strcmp(it.text, fx.text[1]) && it.id == -1 && it.start >= 0 &&
                  it.end <= espnet3_result_duration(r), "%s %g %g", it.text, it.start, it.end);
    cr_expect_str_eq(espnet3_result_text(r, 7), "");
    cr_expect(espnet3_result_duration(r) > 0.1);
    espnet3_result_free(r);
    /* the same samples at 22.05 kHz: resampled to the model's rate, then decoded alike */
    cr_assert_eq(audio_resample("x", &x, &n, fs, 22050, &e), 0, "%s", e.msg);
    r = espnet3_transcribe(m, x, n, 22050);
    cr_assert_not_null(r, "%s", espnet3_last_error());
    cr_expect_str_eq(espnet3_result_text(r, 0), fx.text[1]);
    espnet3_result_free(r);
    cr_expect_null(espnet3_transcribe(m, x, 0, 8000));
    cr_expect_str_eq(espnet3_last_error(), "samples: no audio samples (an empty recording)");
    cr_expect_null(espnet3_transcribe(m, x, 10, 16000));
    cr_expect(strstr(espnet3_last_error(), "samples: 10 samples is shorter than the STFT needs"), "%s",
              espnet3_last_error());
    free(x);
    espnet3_close(m);
}
