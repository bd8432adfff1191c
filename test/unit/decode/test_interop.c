/* Two-way ESPnet parity (scripts/make_interop_fixtures.py, run with the real ESPnet 202511):
 *   espnet_model   trained with ESPnet's own classes, its config.yaml and .pth as ESPnet wrote them:
 *                  espnet3 decodes it to Speech2Text's hypotheses;
 *   espnet3_model  trained by espnet3 and packed for ESPnet (pack_model's espnet/), which ESPnet
 *                  loaded with load_state_dict(strict=True): ESPnet's hypotheses of it are ours.
 * Joint CTC/attention search, ctc_weight 0.3, beam 1 and 4, on three synthetic WAVs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/compute/backend_cpu.h"
#include "core/decode/speech2text.h"
#include "core/formats/zip_unpack.h"
#include "core/nn/model_files.h"
#include "test/unit/test_util.h"

static const char *fx(const char *rel)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/test/fixtures/interop/%s", test_root_dir(), rel);
    return p[k];
}

/* Every hyps.txt line of `model`: espnet3's decode with the same beam and ctc_weight gives ESPnet's
 * token ids and text. */
static void decode_like_espnet(const char *model, const char *pth, const char *zip)
{
    char cfg_path[600], model_path[700];
    snprintf(cfg_path, sizeof cfg_path, "%s", fx(model));
    snprintf(model_path, sizeof model_path, "%s/%s", cfg_path, pth);
    strncat(cfg_path, "/exp/asr_train/config.yaml", sizeof cfg_path - strlen(cfg_path) - 1);
    if (zip) /* an ESPnet2 packed model: both keys name the zip */
        snprintf(cfg_path, sizeof cfg_path, "%s", zip), snprintf(model_path, sizeof model_path, "%s", zip);
    char *hyps = test_slurp(fx("hyps.txt"));
    size_t checked = 0;
    for (int beam = 1; beam <= 4; beam += 3) {
        infer_model_cfg mc = {.asr_train_config = cfg_path, .asr_model_file = model_path, .beam_size = beam,
                              .ctc_weight = 0.3, .nbest = 1};
        inference_cfg ic = {.model = &mc};
        model_files mf;
        esp_err err = {{0}};
        cr_assert_eq(model_files_locate(&mf, &ic, "inference.yaml", &err), 0, "%s", err.msg);
        backend be;
        cr_assert_eq(backend_cpu_init(&be, 1, &err), 0, "%s", err.msg);
        s2t_opts o = {.beam_size = beam, .ctc_weight = 0.3, .nbest = 1};
        speech2text *s = speech2text_open(&be, &mf, &o, &err);
        cr_assert_not_null(s, "%s", err.msg);
        char *copy = strdup(hyps), *save = NULL;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char name[64], utt[32], rest[512];
            int b;
            double w;
            if (sscanf(line, "%63s %d %lf %31s %511[^\n]", name, &b, &w, utt, rest) != 5 || strcmp(name, model) ||
                b != beam)
                continue;
            char *bar = strchr(rest, '|');
            cr_assert_not_null(bar, "%s", line);
            *bar = '\0';
            const char *want_text = bar + 1;
            char wav[64];
            snprintf(wav, sizeof wav, "wav/%s.wav", utt);
            const char *paths[1] = {fx(wav)};
            s2t_hyp h;
            cr_assert_eq(speech2text_decode_files(s, paths, 1, &h, &err), 0, "%s", err.msg);
            char got[512] = "";
            for (size_t i = 0; i < h.n_ids; i++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d", i ? " " : "", h.ids[i]);
            cr_expect_str_eq(got, rest, "%s beam %d %s: ids '%s', ESPnet '%s'", model, beam, utt, got, rest);
            cr_expect_str_eq(h.text, want_text, "%s beam %d %s: text", model, beam, utt);
            s2t_hyp_free(&h);
            checked++;
        }
        free(copy);
        speech2text_close(s);
        be.destroy(&be);
        model_files_free(&mf);
    }
    free(hyps);
    cr_assert_eq(checked, 6, "%s: %zu hypotheses compared", model, checked);
}

/* What locating (and checking) a model's files logs. */
static char *locate_log(const char *cfg_path, const char *model_path)
{
    infer_model_cfg mc = {.asr_train_config = (char *)cfg_path, .asr_model_file = (char *)model_path, .beam_size = 1,
                          .nbest = 1};
    inference_cfg ic = {.model = &mc};
    FILE *log = tmpfile();
    cr_assert_not_null(log);
    log_set_file(log);
    model_files mf;
    esp_err err = {{0}};
    int rc = model_files_locate(&mf, &ic, "inference.yaml", &err);
    log_set_file(NULL);
    cr_assert_eq(rc, 0, "%s", err.msg);
    model_files_free(&mf);
    char *text = calloc(1, 16384);
    cr_assert_not_null(text);
    rewind(log);
    size_t n = fread(text, 1, 16383, log);
    text[n] = '\0';
    fclose(log);
    return text;
}

/* model_files_locate on a model given as both asr_train_config and asr_model_file (a packed zip,
 * or a config); it must fail, and err says why. */
static void locate_fails(char *path, esp_err *err)
{
    infer_model_cfg mc = {.asr_train_config = path, .asr_model_file = path};
    inference_cfg ic = {.model = &mc};
    model_files mf;
    cr_assert_neq(model_files_locate(&mf, &ic, "inference.yaml", err), 0, "%s was located", path);
}

/* espnet_model's config.yaml as dir/config.yaml with its first `from` written as `to` (a path to
 * free). */
static char *espnet_config_with(const char *dir, const char *from, const char *to)
{
    char cfg_path[600];
    snprintf(cfg_path, sizeof cfg_path, "%s/exp/asr_train/config.yaml", fx("espnet_model"));
    esp_err err = {{0}};
    size_t len;
    char *cfg = read_file(cfg_path, READ_LIST, &len, &err), *at = cfg ? strstr(cfg, from) : NULL;
    cr_assert_not_null(at, "%s", err.msg);
    char *copy = path_join(dir, "config.yaml");
    FILE *fp = fopen(copy, "w");
    cr_assert_not_null(fp);
    fprintf(fp, "%.*s%s%s", (int)(at - cfg), cfg, to, at + strlen(from));
    fclose(fp);
    free(cfg);
    return copy;
}

/* An ESPnet2 config.yaml is checked as espnet3's form of it, and what the checks say points at the
 * user's file, line and column (not at a rewritten copy): ESPnet's own config loads without a word,
 * and its ctc_type made brctc (line 34) is refused there. */
Test(interop, espnet2_config_messages_point_at_the_users_file)
{
    char cfg_path[600], model_path[700], want[700];
    snprintf(cfg_path, sizeof cfg_path, "%s/exp/asr_train/config.yaml", fx("espnet_model"));
    snprintf(model_path, sizeof model_path, "%s/exp/asr_train/valid.acc.ave.pth", fx("espnet_model"));
    char *text = locate_log(cfg_path, model_path);
    cr_expect(strstr(text, "WARNING") == NULL, "ESPnet's own config warns:\n%s", text);
    free(text);
    char dir[64];
    test_tmpdir_make(dir, sizeof dir, "interop_brctc");
    esp_err err = {{0}};
    char *copy = espnet_config_with(dir, "ctc_type: builtin", "ctc_type: brctc");
    infer_model_cfg mc = {.asr_train_config = copy, .asr_model_file = model_path};
    inference_cfg ic = {.model = &mc};
    model_files mf;
    cr_assert_neq(model_files_locate(&mf, &ic, "inference.yaml", &err), 0, "brctc was accepted");
    snprintf(want, sizeof want, "%s:34:13: model.ctc_conf.ctc_type: espnet3's CTC is ESPnet2's builtin one", copy);
    cr_expect(strstr(err.msg, want) && !strstr(err.msg, "espnet3_espnet2_config"), "%s", err.msg);
    free(copy);
    test_tmpdir_remove(dir);
}

/* An ESPnet2 config.yaml's normalize: null is none (its model has no normalize layer), not the
 * left-out key's utterance_mvn: the conversion to espnet3's form keeps the null. */
Test(interop, espnet2_configs_normalize_null_stays_none)
{
    char model_path[700], dir[64];
    snprintf(model_path, sizeof model_path, "%s/exp/asr_train/valid.acc.ave.pth", fx("espnet_model"));
    test_tmpdir_make(dir, sizeof dir, "interop_norm_null");
    esp_err err = {{0}};
    char *copy = espnet_config_with(dir, "normalize: global_mvn", "normalize: null");
    infer_model_cfg mc = {.asr_train_config = copy, .asr_model_file = model_path};
    inference_cfg ic = {.model = &mc};
    model_files mf;
    cr_assert_eq(model_files_locate(&mf, &ic, "inference.yaml", &err), 0, "%s", err.msg);
    const char *kind = model_files_training(&mf)->model->normalize;
    cr_assert_null(kind, "normalize: null read as %s", kind);
    model_files_free(&mf);
    free(copy);
    test_tmpdir_remove(dir);
}

/* An ESPnet2 config came from elsewhere: ${oc.env:...}, ${load_line:...} and ${load_yaml:...} in
 * it would read this machine into its values and error text, so they are refused at their line. */
Test(interop, espnet2_config_cannot_read_the_host)
{
    char dir[64], src[600];
    test_tmpdir_make(dir, sizeof dir, "foreign_cfg");
    snprintf(src, sizeof src, "%s/exp/asr_train/config.yaml", fx("espnet_model"));
    size_t len = 0;
    esp_err err = {{0}};
    char *text = read_file(src, READ_LIST, &len, &err);
    cr_assert_not_null(text, "%s", err.msg);
    static const char *const values[] = {"${oc.env:HOME}", "${load_line:/etc/hostname}", "${load_yaml:/etc/x.yaml}"};
    static const char *const names[] = {"oc.env", "load_line", "load_yaml"};
    setenv("HOME", getenv("HOME") ? getenv("HOME") : "/root", 1);
    for (int i = 0; i < 3; i++) {
        char *at = strstr(text, "  output_size: 32\n");
        cr_assert_not_null(at);
        char cfg[128];
        snprintf(cfg, sizeof cfg, "%s/config%d.yaml", dir, i);
        FILE *fp = fopen(cfg, "w");
        cr_assert_not_null(fp);
        fprintf(fp, "%.*s  output_size: \"%s\"\n%s", (int)(at - text), text, values[i], at + strlen("  output_size: 32\n"));
        fclose(fp);
        locate_fails(cfg, &err);
        char want[200];
        snprintf(want, sizeof want, "${%s:...} reads this machine and is off in a config from elsewhere", names[i]);
        cr_expect(strstr(err.msg, cfg) && strstr(err.msg, want), "%s", err.msg);
        cr_expect(!strstr(err.msg, "/root") && !strchr(err.msg, '\n'), "%s", err.msg);
    }
    free(text);
    test_tmpdir_remove(dir);
}

Test(interop, espnet_trained_model_decodes_to_espnets_hypotheses)
{
    decode_like_espnet("espnet_model", "exp/asr_train/valid.acc.ave.pth", NULL);
}

/* dir/model.zip: the fixture's espnet_model folder as ESPnet's pack zips it (meta.yaml at the root,
 * deflated entries); an entry ending in `broken` (NULL: none) holds junk instead. */
static void zip_espnet_model(const char *dir, const char *broken)
{
    char code[1200], *root = realpath(fx("espnet_model"), NULL);
    cr_assert_not_null(root);
    snprintf(code, sizeof code,
             "import os, zipfile\n"
             "root, broken = '%s', '%s'\n"
             "with zipfile.ZipFile('model.zip', 'w', zipfile.ZIP_DEFLATED) as z:\n"
             "    for d, _, fs in os.walk(root):\n"
             "        for f in fs:\n"
             "            p = os.path.join(d, f); r = os.path.relpath(p, root)\n"
             "            if broken and r.endswith(broken): z.writestr(r, b'not what it should be')\n"
             "            else: z.write(p, r)\n",
             root, broken ? broken : "");
    free(root);
    cr_assert_eq(test_run_python(dir, code), 0);
}

/* The same model as ESPnet's pack zips it. */
Test(interop, espnet2_packed_model_zip_decodes_alike)
{
    char dir[64], code[1024];
    test_tmpdir_make(dir, sizeof dir, "interop_zip");
    zip_espnet_model(dir, NULL);
    decode_like_espnet("espnet_model", NULL, test_path(dir, "model.zip"));
    /* messages about the zipped config name the zip and the member */
    char zip[256], want[400];
    snprintf(code, sizeof code,
             "import zipfile\n"
             "src = zipfile.ZipFile('model.zip')\n"
             "with zipfile.ZipFile('brctc.zip', 'w') as z:\n"
             "    for n in src.namelist():\n"
             "        b = src.read(n)\n"
             "        z.writestr(n, b.replace(b'ctc_type: builtin', b'ctc_type: brctc') if n.endswith('config.yaml') else b)\n");
    cr_assert_eq(test_run_python(dir, code), 0);
    snprintf(zip, sizeof zip, "%s", test_path(dir, "brctc.zip"));
    esp_err zerr = {{0}};
    locate_fails(zip, &zerr);
    snprintf(want, sizeof want, "%s(exp/asr_train/config.yaml):34:13: model.ctc_conf.ctc_type", zip);
    cr_expect(strstr(zerr.msg, want) != NULL && strstr(zerr.msg, "espnet3_espnet2_pack") == NULL, "%s", zerr.msg);
    /* a zip whose entry escapes the folder is refused, naming it */
    snprintf(code, sizeof code,
             "import zipfile\n"
             "with zipfile.ZipFile('evil.zip', 'w') as z:\n"
             "    z.writestr('meta.yaml', 'files: {}')\n"
             "    z.writestr('../escape.txt', 'x')\n");
    cr_assert_eq(test_run_python(dir, code), 0);
    char zp[256];
    snprintf(zp, sizeof zp, "%s", test_path(dir, "evil.zip"));
    esp_err err = {{0}};
    locate_fails(zp, &err);
    cr_assert(strstr(err.msg, "entry '../escape.txt': not a plain relative path"), "%s", err.msg);
    cr_assert_not(test_exists(test_path(dir, "escape.txt")));
    /* a newline in the entry's name stays out of the one-line message */
    snprintf(code, sizeof code,
             "import zipfile\n"
             "with zipfile.ZipFile('evil.zip', 'w') as z:\n"
             "    z.writestr('meta.yaml', 'files: {}')\n"
             "    z.writestr('../esc\\nape.txt', 'x')\n");
    cr_assert_eq(test_run_python(dir, code), 0);
    locate_fails(zp, &err);
    cr_assert(strstr(err.msg, "entry '../esc\\x0aape.txt': not a plain relative path") && !strchr(err.msg, '\n'), "%s",
              err.msg);
    /* meta.yaml naming files outside the zip (issue 44): refused, nothing outside is read */
    test_write_text(test_path(dir, "outside_config.yaml"), "token_list: [a, b]\n");
    test_write_text(test_path(dir, "outside_model.pth"), "not a model\n");
    for (int e = 0; e < 2; e++) { /* through "..", then an absolute path */
        char target[400];
        if (e == 0) snprintf(target, sizeof target, "../../../../../../../..%s/outside_config.yaml", dir);
        else snprintf(target, sizeof target, "%s/outside_config.yaml", dir);
        snprintf(code, sizeof code,
                 "import zipfile\n"
                 "with zipfile.ZipFile('evil.zip', 'w') as z:\n"
                 "    z.writestr('meta.yaml', 'yaml_files: {asr_train_config: %s}\\nfiles: {asr_model_file: m.pth}\\n')\n"
                 "    z.writestr('m.pth', 'x')\n",
                 target);
        cr_assert_eq(test_run_python(dir, code), 0);
        locate_fails(zp, &err);
        cr_assert(strstr(err.msg, "evil.zip: meta.yaml names ") && strstr(err.msg, "which is not a file inside the zip"),
                  "%s", err.msg);
    }
    test_tmpdir_remove(dir);
}

/* A broken file inside a packed zip (its statistics, read when decoding starts): the reader's message
 * names "<zip>(<entry>)", not the unpacked copy, which is gone by then (issue 44). */
Test(interop, a_broken_file_in_a_packed_zip_is_named_by_its_entry)
{
    char dir[64];
    test_tmpdir_make(dir, sizeof dir, "interop_zip_entry");
    zip_espnet_model(dir, "feats_stats.npz");
    char zip[256];
    snprintf(zip, sizeof zip, "%s", test_path(dir, "model.zip"));
    infer_model_cfg mc = {.asr_train_config = zip, .asr_model_file = zip, .beam_size = 1, .nbest = 1, .ctc_weight = 1};
    inference_cfg ic = {.model = &mc};
    model_files mf;
    esp_err err = {{0}};
    cr_assert_eq(model_files_locate(&mf, &ic, "inference.yaml", &err), 0, "%s", err.msg);
    backend be;
    cr_assert_eq(backend_cpu_init(&be, 1, &err), 0, "%s", err.msg);
    s2t_opts o = {.beam_size = 1, .ctc_weight = 1, .nbest = 1};
    cr_assert_null(speech2text_open(&be, &mf, &o, &err), "a broken statistics file was read");
    char want[400];
    snprintf(want, sizeof want, "%s(exp/asr_stats/train/feats_stats.npz)", zip);
    cr_expect(strstr(err.msg, want) && !strstr(err.msg, "espnet3_espnet2_pack"), "%s", err.msg);
    be.destroy(&be);
    model_files_free(&mf);
    test_tmpdir_remove(dir);
}

/* A token-list error of an ESPnet2 config given as a folder names the user's place, not the private
 * copy the config is read through (issue 44): the inline list's item as config.yaml:line:col, or
 * the token_list file's line. */
static void open_fails(const char *cfg, const char *model, esp_err *err)
{
    infer_model_cfg mc = {.asr_train_config = (char *)cfg, .asr_model_file = (char *)model, .beam_size = 1,
                          .nbest = 1, .ctc_weight = 1};
    inference_cfg ic = {.model = &mc};
    model_files mf;
    cr_assert_eq(model_files_locate(&mf, &ic, "inference.yaml", err), 0, "%s", err->msg);
    backend be;
    cr_assert_eq(backend_cpu_init(&be, 1, err), 0, "%s", err->msg);
    s2t_opts o = {.beam_size = 1, .ctc_weight = 1, .nbest = 1};
    cr_assert_null(speech2text_open(&be, &mf, &o, err), "a token list with a repeated token was read");
    be.destroy(&be);
    model_files_free(&mf);
}

Test(interop, a_token_list_error_names_the_users_config_or_file)
{
    char dir[64];
    test_tmpdir_make(dir, sizeof dir, "interop_tokens");
    cr_assert_eq(test_sh("cp -r '%s' '%s/m'", fx("espnet_model"), dir), 0);
    char cfg[256], model[256], toks[256], want[600];
    snprintf(cfg, sizeof cfg, "%s/m/exp/asr_train/config.yaml", dir);
    snprintf(model, sizeof model, "%s/m/exp/asr_train/valid.acc.ave.pth", dir);
    snprintf(toks, sizeof toks, "%s/tokens.txt", dir);
    /* inline: item 4 ("- B" on line 18) made a second A */
    char code[2400];
    snprintf(code, sizeof code,
             "c = open('%s').read()\n"
             "assert c.split('\\n')[17] == '- B'\n"
             "open('%s', 'w').write(c.replace('\\n- B\\n', '\\n- A\\n', 1))\n",
             cfg, cfg);
    cr_assert_eq(test_run_python(dir, code), 0);
    esp_err err = {{0}};
    open_fails(cfg, model, &err);
    snprintf(want, sizeof want, "%s:18:3: token A appears more than once", cfg);
    cr_expect(strstr(err.msg, want) && !strstr(err.msg, "espnet3_espnet2_config"), "%s", err.msg);
    /* a file: the same list, token_list naming it; line 5 is the second A */
    snprintf(code, sizeof code,
             "import re\n"
             "c = open('%s').read()\n"
             "m = re.search(r'token_list:\\n((?:- .*\\n)+)', c)\n"
             "open('%s', 'w').write(''.join(l[2:] + '\\n' for l in m.group(1).splitlines()))\n"
             "open('%s', 'w').write(c[:m.start()] + 'token_list: %s\\n' + c[m.end():])\n",
             cfg, toks, cfg, toks);
    cr_assert_eq(test_run_python(dir, code), 0);
    open_fails(cfg, model, &err);
    snprintf(want, sizeof want, "%s:5: token A appears more than once", toks);
    cr_expect(strstr(err.msg, want) && !strstr(err.msg, "espnet3_espnet2_config"), "%s", err.msg);
    test_tmpdir_remove(dir);
}

/* Zip bombs (issue 44): an entry that inflates more than 64x, and a zip of thousands of entries,
 * are refused from the central directory before a byte is written or allocated. */
Test(interop, espnet2_packed_zip_bombs_are_refused_before_unpacking)
{
    char dir[64];
    test_tmpdir_make(dir, sizeof dir, "zipbomb");
    char code[1024];
    snprintf(code, sizeof code,
             "import zipfile\n"
             "with zipfile.ZipFile('bomb.zip', 'w', zipfile.ZIP_DEFLATED) as z:\n"
             "    z.writestr('meta.yaml', 'files: {}')\n"
             "    z.writestr('exp/m.pth', bytes(200 << 20))\n"
             "with zipfile.ZipFile('many.zip', 'w') as z:\n"
             "    z.writestr('meta.yaml', 'files: {}')\n"
             "    for i in range(5000): z.writestr('e/%%d' %% i, b'')\n");
    cr_assert_eq(test_run_python(dir, code), 0);
    char out[256];
    snprintf(out, sizeof out, "%s", test_path(dir, "out"));
    esp_err err = {{0}};
    char zp[256];
    snprintf(zp, sizeof zp, "%s", test_path(dir, "bomb.zip"));
    cr_assert_neq(zip_unpack(zp, out, ZIP_UNPACK_MAX_BYTES, &err), 0);
    cr_expect(strstr(err.msg, "bomb.zip: entry 'exp/m.pth' declares 209715200 bytes from ") &&
                  strstr(err.msg, "a zip bomb"), "%s", err.msg);
    cr_expect_not(test_exists(out), "the bomb was unpacked before it was refused");
    snprintf(zp, sizeof zp, "%s", test_path(dir, "many.zip"));
    cr_assert_neq(zip_unpack(zp, out, ZIP_UNPACK_MAX_BYTES, &err), 0);
    cr_expect(strstr(err.msg, "many.zip: 5001 entries, more than the 4096 a packed model may hold"), "%s", err.msg);
    cr_expect_not(test_exists(out));
    /* a real pack's shape (a config, weights that hardly compress) unpacks whole, in chunks */
    snprintf(code, sizeof code,
             "import zipfile, random\n"
             "random.seed(1)\n"
             "w = bytes(random.getrandbits(8) for _ in range(3 << 20))\n"
             "with zipfile.ZipFile('ok.zip', 'w', zipfile.ZIP_DEFLATED) as z:\n"
             "    z.writestr('meta.yaml', 'files: {}\\n' * 50)\n"
             "    z.writestr('exp/m.pth', w)\n"
             "open('m.pth', 'wb').write(w)\n");
    cr_assert_eq(test_run_python(dir, code), 0);
    snprintf(zp, sizeof zp, "%s", test_path(dir, "ok.zip"));
    cr_assert_eq(zip_unpack(zp, out, ZIP_UNPACK_MAX_BYTES, &err), 0, "%s", err.msg);
    size_t a_len = 0, b_len = 0;
    char *a = read_file(test_path(dir, "m.pth"), READ_LIST, &a_len, &err);
    char *b = read_file(test_path(dir, "out/exp/m.pth"), READ_LIST, &b_len, &err);
    cr_assert(a && b);
    cr_expect(a_len == (size_t)3 << 20 && a_len == b_len && !memcmp(a, b, a_len));
    free(a);
    free(b);
    test_tmpdir_remove(dir);
}

/* What a message says about a file of an unpacked zip names it as <zip>(<entry>): the unpacked
 * copy is removed before the message is read (issue 44). */
Test(interop, messages_about_a_packed_models_files_name_the_zip_entry)
{
    char dir[64];
    test_tmpdir_make(dir, sizeof dir, "zipmsg");
    char code[1600];
    snprintf(code, sizeof code,
             "import re, zipfile\n"
             "cfg = open('%s/exp/asr_train/config.yaml').read()\n"
             "cfg = re.sub(r'stats_file: .*', 'stats_file: exp/asr_stats/missing_stats.npz', cfg)\n"
             "with zipfile.ZipFile('model.zip', 'w') as z:\n"
             "    z.writestr('meta.yaml', 'yaml_files: {asr_train_config: exp/asr_train/config.yaml}\\n'\n"
             "               'files: {asr_model_file: exp/asr_train/m.pth}\\n')\n"
             "    z.writestr('exp/asr_train/config.yaml', cfg)\n"
             "    z.write('%s/exp/asr_train/valid.acc.ave.pth', 'exp/asr_train/m.pth')\n",
             fx("espnet_model"), fx("espnet_model"));
    cr_assert_eq(test_run_python(dir, code), 0);
    char zp[256];
    snprintf(zp, sizeof zp, "%s", test_path(dir, "model.zip"));
    esp_err err = {{0}};
    locate_fails(zp, &err);
    char want[1200];
    snprintf(want, sizeof want, "missing_stats.npz: no feature statistics (named by "
             "model.normalize_conf.stats_file in %s(exp/asr_train/config.yaml))", zp);
    cr_expect(strstr(err.msg, want), "%s", err.msg);
    cr_expect_null(strstr(err.msg, "espnet3_espnet2_pack"), "%s", err.msg);
    test_tmpdir_remove(dir);
}

Test(interop, espnet3_packed_model_decodes_in_espnet_as_in_espnet3)
{
    decode_like_espnet("espnet3_model", "exp/asr_train/valid.loss.ave.pth", NULL);
}
