/* Stage 6's hyp.ctm writer (stages/infer_ctm.h): sclite's order (file, then start time), a Kaldi
 * segment's words on its recording's clock under the recording's name, conf as exp(score) in
 * [0, 1], words without times left out. The stage end to end: test/unit/decode/test_timestamps.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "stages/infer_ctm.h"
#include "test/unit/test_util.h"

Test(infer_ctm, sorted_segments_on_the_recording_clock)
{
    char dir[64];
    test_tmpdir_make(dir, sizeof dir, "infer_ctm");
    manifest_entry whole = {.utt = "utt_b", .wav = "/data/b.wav"};
    manifest_entry seg2 = {.utt = "rec1-0002", .wav = "/data/rec1.flac", .start = 12.5, .end = 20.0};
    manifest_entry seg1 = {.utt = "rec1-0001", .wav = "/data/rec1.flac", .start = 3.0, .end = 9.0};
    ctm_lines *c = ctm_lines_new();
    ctm_add(c, &whole, 0.52, 0.80, log(0.9), "HELLO", 5);
    ctm_add(c, &seg2, 0.10, 0.50, 0.0, "LATER", 5);
    ctm_add(c, &seg1, 1.00, 1.25, log(0.25), "FIRSTX", 5); /* len cuts it */
    ctm_add(c, &seg1, NAN, NAN, 0.0, "LOST", 4);
    ctm_add(c, &whole, 0.10, 0.40, 0.5, "WORLD", 5); /* a score above 0 (impossible) clamps to 1 */
    char *path = xasprintf("%s/hyp.ctm", dir);
    esp_err err;
    cr_assert_eq(ctm_write(c, path, &err), 0, "%s", err.msg);
    size_t len;
    char *got = read_file(path, READ_LIST, &len, &err);
    cr_assert_not_null(got, "%s", err.msg);
    cr_expect_str_eq(got, "rec1 1 4.000 0.250 FIRST 0.2500\n"
                          "rec1 1 12.600 0.400 LATER 1.0000\n"
                          "utt_b 1 0.100 0.300 WORLD 1.0000\n"
                          "utt_b 1 0.520 0.280 HELLO 0.9000\n");
    free(got), free(path);
    ctm_lines_free(c);
    test_tmpdir_remove(dir);
}
