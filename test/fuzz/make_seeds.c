/* Writes the seed corpora of the reader fuzzers (test/fuzz/seeds/<target>/) with espnet3's own
 * writers and libsndfile: `make -f test/fuzz/fuzz.mk fuzz-seeds`. The output is deterministic, so
 * rerunning it changes nothing unless a writer changed. (seeds/npz/numpy_compressed.npz is the one
 * foreign file: np.savez_compressed of count, sum and sum_square, written once by numpy.) */
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/data/tokenizer.h"
#include "core/formats/manifest.h"
#include "core/formats/metrics_csv.h"
#include "core/formats/npz.h"
#include "core/formats/safetensors.h"
#include "core/train/checkpoint.h"

static const char *root = "test/fuzz/seeds";
static char tmp[] = "/tmp/espnet3_seeds_XXXXXX";

static const char *out(const char *target, const char *name)
{
    static char buf[4][512];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", root, target);
    esp_err err;
    if (mkdir_p(b, &err) != 0) esp_die_err(&err);
    snprintf(b, sizeof buf[0], "%s/%s/%s", root, target, name);
    return b;
}

static const char *in_tmp(const char *rel)
{
    static char buf[4][512];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", tmp, rel);
    return b;
}

static void check(int rc, const esp_err *err)
{
    if (rc != 0) esp_die_err(err);
}

static void put(const char *path, const void *data, size_t len)
{
    esp_err err;
    check(atomic_write_file(path, data, len, &err), &err);
}

static void put_text(const char *path, const char *text) { put(path, text, strlen(text)); }

/* Concatenates files with FUZZ_SEP (0x1e) between them: the multi-file targets' input. */
static void put_joined(const char *path, const char *const *files, size_t n)
{
    size_t len = 0;
    char *all = NULL;
    for (size_t i = 0; i < n; i++) {
        esp_err err;
        size_t fl;
        char *f = read_file(files[i], READ_LIST, &fl, &err);
        if (!f) esp_die_err(&err);
        all = xrealloc(all, len + fl + 1);
        memcpy(all + len, f, fl);
        len += fl;
        if (i + 1 < n) all[len++] = '\x1e';
        free(f);
    }
    put(path, all, len);
    free(all);
}

static void safetensors_seeds(void)
{
    esp_err err;
    float w[2][3] = {{0.5f, -1, 2}, {3, 4, 1e-3f}}, b[3] = {0, 1, -1}, scalar = 7;
    st_kv meta[] = {{"format", "pt"}};
    st_tensor model[] = {
        {.name = "encoder.embed.out.weight", .dtype = ST_F32, .ndim = 2, .shape = {2, 3}, .data = w},
        {.name = "encoder.embed.out.bias", .dtype = ST_F32, .ndim = 1, .shape = {3}, .data = b},
        {.name = "ctc.scale", .dtype = ST_F32, .ndim = 0, .data = &scalar},
    };
    check(st_write(out("safetensors", "model.safetensors"), model, 3, meta, 1, &err), &err);

    double d[2] = {1.5, -2};
    int64_t i64[2] = {-1, 1LL << 40};
    uint16_t half[3] = {0x3c00, 0xc000, 0x7e00};
    unsigned char u8[5] = {0, 1, 2, 254, 255};
    int32_t i32[1] = {-7};
    st_tensor mixed[] = {
        {.name = "f64", .dtype = ST_F64, .ndim = 1, .shape = {2}, .data = d},
        {.name = "i64", .dtype = ST_I64, .ndim = 2, .shape = {1, 2}, .data = i64},
        {.name = "f16", .dtype = ST_F16, .ndim = 1, .shape = {3}, .data = half},
        {.name = "bf16", .dtype = ST_BF16, .ndim = 1, .shape = {3}, .data = half},
        {.name = "u8", .dtype = ST_U8, .ndim = 1, .shape = {5}, .data = u8},
        {.name = "bool", .dtype = ST_BOOL, .ndim = 1, .shape = {2}, .data = u8},
        {.name = "i32", .dtype = ST_I32, .ndim = 3, .shape = {1, 1, 1}, .data = i32},
        {.name = "empty", .dtype = ST_F32, .ndim = 2, .shape = {0, 4}, .data = NULL},
    };
    check(st_write(out("safetensors", "mixed_dtypes.safetensors"), mixed, 8, NULL, 0, &err), &err);
    check(st_write(out("safetensors", "no_tensors.safetensors"), NULL, 0, meta, 1, &err), &err);
}

/* A checkpoint as ckpt_save writes it: epoch=0-step=5, then epoch=1-step=10 (which ranks both). */
static void trainer_state_seeds(void)
{
    esp_err err;
    float w[6] = {1, 2, 3, 4, 5, 6}, m1[6] = {0.1f}, m2[6] = {0.01f};
    st_tensor model[] = {{.name = "encoder.w", .dtype = ST_F32, .ndim = 2, .shape = {2, 3}, .data = w}};
    st_tensor state[] = {{.name = "optimizer.exp_avg", .dtype = ST_F32, .ndim = 1, .shape = {6}, .data = m1},
                         {.name = "optimizer.exp_avg_sq", .dtype = ST_F32, .ndim = 1, .shape = {6}, .data = m2}};
    criterion_cfg crit[] = {{"valid/loss", 2, "min"}, {"valid/acc", 2, "max"}};
    uint64_t rng[2] = {42, 0xfedcba9876543210u};
    ckpt_counter counters[] = {{"optimizer.step", 10}, {"scheduler.last_epoch", 1}, {"nan_guard.countdown", 0}};
    ckpt_manager m;
    check(ckpt_open(&m, in_tmp("exp"), crit, 2, &err), &err);
    metric m0[] = {{"valid/loss", 2.5, 0}, {"valid/acc", NAN, 0}, {"epoch", 0, 1}};
    ckpt_info i0 = {.epoch = 0, .step = 5, .metrics = m0, .n_metrics = 3, .rng = rng, .n_rng = 2,
                    .counters = counters, .n_counters = 3, .config_hash = "0123abcd"};
    check(ckpt_save(&m, &i0, model, 1, state, 2, &err), &err);
    metric m1v[] = {{"valid/loss", 1.75, 0}, {"valid/acc", 0.5, 0}, {"train/loss", INFINITY, 0}};
    ckpt_info i1 = {.epoch = 1, .step = 10, .metrics = m1v, .n_metrics = 3, .rng = rng, .n_rng = 2,
                    .counters = counters, .n_counters = 3, .config_hash = NULL};
    check(ckpt_save(&m, &i1, model, 1, state, 2, &err), &err);
    ckpt_close(&m);
    const char *json = in_tmp("exp/checkpoints/epoch=1-step=10/trainer_state.json");
    const char *st = in_tmp("exp/checkpoints/epoch=1-step=10/trainer_state.safetensors");
    put_joined(out("trainer_state", "state_json_only"), &json, 1);
    const char *both[] = {json, st};
    put_joined(out("trainer_state", "state_json_and_tensors"), both, 2);
}

static void npz_seeds(void)
{
    esp_err err;
    int64_t count = 98;
    float sum[8] = {1, -2, 3.5f, 4, 5, 6, 7, 8};
    double sq[8] = {10, 20, 30, 40, 50, 60, 70, 80};
    double grid[2][3] = {{1, 2, 3}, {4, 5, 6}};
    npy_array a[] = {
        {.name = "count", .dtype = NPY_I64, .ndim = 0, .count = 1, .data = &count},
        {.name = "sum", .dtype = NPY_F32, .ndim = 1, .shape = {8}, .count = 8, .data = sum},
        {.name = "sum_square", .dtype = NPY_F64, .ndim = 1, .shape = {8}, .count = 8, .data = sq},
        {.name = "grid", .dtype = NPY_F64, .ndim = 2, .shape = {2, 3}, .count = 6, .data = grid},
    };
    check(npz_write(out("npz", "feats_stats.npz"), a, 3, &err), &err);
    check(npz_write(out("npz", "two_dims.npz"), a + 3, 1, &err), &err);
}

static void text_seeds(void)
{
    esp_err err;
    const char *texts[] = {"hello world", "w\xc3\xb6rld of espnet", "a b c"};
    token_list tl;
    char_token_list_build(texts, 3, &tl);
    check(token_list_write(out("tokens", "tokens.txt"), &tl, &err), &err);
    token_list_free(&tl);

    manifest m = {0};
    manifest_add(&m, "spk1-utt1", "data/wav/utt1.wav", "hello world", "spk1");
    manifest_add(&m, "spk1-utt2", "/abs/path/utt2.flac", "", "spk1");
    manifest_add(&m, "spk2-utt3", "utt3.wav", "w\xc3\xb6rld of espnet", "spk2");
    check(manifest_write_tsv(out("manifest", "train.tsv"), &m, &err), &err);
    check(manifest_write_kaldi_dir(in_tmp("data"), &m, &err), &err);
    manifest_free(&m);
    const char *dir[] = {in_tmp("data/wav.scp"), in_tmp("data/text"), in_tmp("data/utt2spk")};
    put_joined(out("kaldi_dir", "with_utt2spk"), dir, 3);
    put_joined(out("kaldi_dir", "without_utt2spk"), dir, 2);

    /* As collect_stats writes them ("uid T,D" and "uid L,V"). */
    put_text(out("shapes", "feats_shape"), "spk1-utt1 98,80\nspk1-utt2 7,80\nspk2-utt3 301,80\n");
    put_text(out("shapes", "text_shape.char"), "spk1-utt1 11,30\nspk1-utt2 0,30\nspk2-utt3 16,30\n");
    put_text(out("text_scp", "ref.scp"), "spk1-utt1 HELLO WORLD\nspk1-utt2\nspk2-utt3 W\xc3\x96RLD  OF\tESPNET\n");
    /* espnet3 align's transcripts: Kaldi style, and plain lines with a blank one and CRLF ends */
    put_text(out("align_text", "kaldi"), "rec-0001 THE SALE OF THE HOTELS\nrec-0002 ON PROPERTY MANAGEMENT\n");
    put_text(out("align_text", "plain"), "THE SALE OF THE HOTELS\r\n\r\nON PROPERTY MANAGEMENT\r\n");
}

static void audio_seed_in(const char *target, const char *name, int fs, int format, int channels, int frames)
{
    SF_INFO info = {.samplerate = fs, .channels = channels, .format = format};
    SNDFILE *sf = sf_open(out(target, name), SFM_WRITE, &info);
    if (!sf) esp_die("%s: %s", name, sf_strerror(NULL));
    sf_command(sf, SFC_SET_ADD_PEAK_CHUNK, NULL, SF_FALSE); /* it holds a time stamp */
    float *x = xmalloc((size_t)(frames * channels) * sizeof *x);
    for (int i = 0; i < frames * channels; i++) x[i] = 0.5f * sinf(0.07f * (float)i) + (i % 7 == 0 ? 0.25f : 0);
    if (sf_writef_float(sf, x, frames) != frames) esp_die("%s: %s", name, sf_strerror(sf));
    free(x);
    sf_close(sf);
}

static void audio_seed(const char *name, int format, int channels, int frames)
{
    audio_seed_in("audio", name, 16000, format, channels, frames);
}

/* The block reader's seeds: at the model's rate and at others it resamples. */
static void audio_stream_seeds(void)
{
    audio_seed_in("audio_stream", "pcm16.wav", 16000, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 300);
    audio_seed_in("audio_stream", "pcm16_8k.wav", 8000, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 200);
    audio_seed_in("audio_stream", "float_22k.wav", 22050, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 1, 100);
    audio_seed_in("audio_stream", "pcm16_8k.flac", 8000, SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 1, 400);
}

/* Bytes as given into seeds/<target>/<name>. */
static void raw_seed(const char *target, const char *name, const void *bytes, size_t n)
{
    FILE *fp = fopen(out(target, name), "wb");
    if (!fp || fwrite(bytes, 1, n, fp) != n || fclose(fp) != 0) esp_die("cannot write %s", out(target, name));
}

/* The stream reader's seeds: a WAV as libsndfile writes it, raw samples, a WAV whose data size a
 * pipe writer left at 0xFFFFFFFF after a LIST chunk of odd size, and a stereo one it refuses. */
static void pcm_stream_seeds(void)
{
    audio_seed_in("pcm_stream", "pcm16.wav", 16000, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 100);
    audio_seed_in("pcm_stream", "pcm16_8k.wav", 8000, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 50);
    unsigned char raw[64];
    for (int i = 0; i < 64; i++) raw[i] = (unsigned char)(i * 37);
    raw_seed("pcm_stream", "raw.pcm", raw, sizeof raw);
    static const unsigned char piped[] = {'R', 'I', 'F', 'F', 0xFF, 0xFF, 0xFF, 0xFF, 'W', 'A', 'V', 'E', 'f', 'm', 't',
                                          ' ', 16, 0, 0, 0, 1, 0, 1, 0, 0x80, 0x3E, 0, 0, 0, 0x7D, 0, 0, 2, 0, 16, 0,
                                          'L', 'I', 'S', 'T', 3, 0, 0, 0, 'a', 'b', 'c', 0, 'd', 'a', 't', 'a', 0xFF,
                                          0xFF, 0xFF, 0xFF, 1, 0, 0xFF, 0x7F, 0, 0x80, 0x34, 0x12};
    raw_seed("pcm_stream", "piped.wav", piped, sizeof piped);
    audio_seed_in("pcm_stream", "stereo.wav", 16000, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 2, 20);
}

static void audio_seeds(void)
{
    audio_seed("pcm16.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 200);
    audio_seed("pcm24.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_24, 1, 100);
    audio_seed("float.wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT, 1, 64);
    audio_seed("u8.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_U8, 1, 100);
    audio_seed("wavex.wav", SF_FORMAT_WAVEX | SF_FORMAT_PCM_16, 1, 100);
    audio_seed("stereo.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 2, 50);
    audio_seed("pcm16.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 1, 400);
    audio_seed("pcm24.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_24, 1, 200);
}

static void metrics_csv_seeds(void)
{
    esp_err err;
    metrics_csv m;
    const char *path = out("metrics_csv", "metrics.csv");
    unlink(path);
    check(metrics_csv_open(&m, path, -1, &err), &err);
    metric a[] = {{"train/loss", 12.5, 0}, {"lr", 1e-05, 0}};
    check(metrics_csv_log(&m, 1, a, 2, &err), &err);
    metric b[] = {{"train/loss", NAN, 0}, {"epoch", 0, 1}};
    check(metrics_csv_log(&m, 2, b, 2, &err), &err);
    metric c[] = {{"valid/loss", INFINITY, 0}, {"valid/acc", 0.25, 0}, {"epoch", 0, 1}, {"odd,\"key\"", -3, 0}};
    check(metrics_csv_log(&m, 4, c, 4, &err), &err);
    check(metrics_csv_log(&m, 5, a, 2, &err), &err);
    metrics_csv_close(&m);
}

int main(void)
{
    if (!mkdtemp(tmp)) esp_die("cannot create %s", tmp);
    log_set_quiet(1);
    safetensors_seeds();
    trainer_state_seeds();
    npz_seeds();
    text_seeds();
    audio_seeds();
    audio_stream_seeds();
    pcm_stream_seeds();
    metrics_csv_seeds();
    remove_tree(tmp);
    return 0;
}
