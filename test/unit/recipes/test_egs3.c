/* Integration: ESPnet3 recipe folders as they ship. test/fixtures/egs3/mini_an4/asr (ESPnet3's
 * layout and training config, and ESPnet3's own Python dataset/ package and src.tokenizer, copied
 * as they are) runs stages 1-8 from inside a copy of it; a user's own Python Dataset is exported
 * once, reused, and exported again when its code changes; bad Python is one error line with
 * nothing half written. The recipe's Python runs with what it imports: the stages 1-8 test in the
 * test venv's Python with the real torch 2.11 (scripts/install_test_venv.sh; it sees Debian's
 * soundfile and PyYAML), the others in Debian's /usr/bin/python3 (numpy, soundfile, PyYAML:
 * scripts/install_deps.sh) with test/fixtures/egs3/torch_standin for torch's Dataset base class
 * (a Python start without torch's import: seconds less each); the two espnet3 modules come from
 * test/fixtures/egs3/espnet3_standin (ESPnet3 is not on PyPI), and sph2pipe is the stand-in on
 * sox in test/fixtures/egs3/tools, put on PATH here. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/audio.h"
#include "core/formats/manifest.h"
#include "core/formats/npz.h"
#include "core/formats/safetensors.h"
#include "core/nn/model_files.h"
#include "test/unit/test_util.h"

static char workdir[256];

static void setup(void) { test_tmpdir_make(workdir, sizeof workdir, "egs3"); }
static void teardown(void) { test_tmpdir_remove(workdir); }

TestSuite(egs3, .init = setup, .fini = teardown);

/* The recipe's Python: Debian's with the torch stand-in, or (use_real_torch) the test venv's. */
static char python_env[2048];

static const char *py_env(void)
{
    if (!python_env[0])
        snprintf(python_env, sizeof python_env,
                 "ESPNET3_PYTHON=/usr/bin/python3 PYTHONPATH='%s/test/fixtures/egs3/espnet3_standin:%s/test/fixtures/egs3/"
                 "torch_standin' ",
                 test_root_dir(), test_root_dir());
    return python_env;
}

static void use_real_torch(void)
{
    const char *python = test_venv_tool("python");
    snprintf(python_env, sizeof python_env, "ESPNET3_PYTHON='%s' PYTHONPATH='%s/test/fixtures/egs3/espnet3_standin' ",
             python, test_root_dir());
}

/* Runs the binary in dir with args; output in workdir/<log>.{out,err}; returns the exit status. */
static int run_in(const char *dir, const char *args, const char *log)
{
    return test_sh("cd '%s' && PATH='%s/test/fixtures/egs3/tools':\"$PATH\" %stimeout 300 '%s' %s >'%s/%s.out' 2>'%s/%s.err'",
                   dir, test_root_dir(), py_env(), test_bin_path(), args, workdir, log, workdir, log);
}

static char *log_of(const char *log, const char *ext)
{
    char name[64];
    snprintf(name, sizeof name, "%s.%s", log, ext);
    return test_slurp_or_empty(test_path(workdir, name));
}

/* Folders under dir/data/py_export (exports and leftovers alike; ".lock" is not one). */
static int count_exports(const char *recipe, int *tmp_left)
{
    DIR *d = opendir(test_path(recipe, "data/py_export"));
    int n = 0;
    *tmp_left = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        n++;
        if (strstr(e->d_name, ".tmp-")) (*tmp_left)++;
    }
    closedir(d);
    return n;
}

static void copy_mini_an4(char *recipe, size_t cap)
{
    snprintf(recipe, cap, "%s/egs3/mini_an4/asr", workdir);
    cr_assert_eq(test_sh("mkdir -p '%s/egs3/mini_an4' && cp -r '%s/test/fixtures/egs3/mini_an4/asr' '%s/egs3/mini_an4/' && "
                         "cp '%s/recipes/mini_an4/downloads.tar.gz' '%s/'",
                         workdir, test_root_dir(), workdir, test_root_dir(), recipe),
                 0);
}

Test(egs3, mini_an4_runs_stages_1_8_from_its_folder_with_its_python_dataset)
{
    use_real_torch(); /* ESPnet3's dataset.py imports torch: the real one here */
    char recipe[512];
    copy_mini_an4(recipe, sizeof recipe);
    int rc = run_in(recipe, "--training_config conf/training_asr_transformer.yaml --inference_config conf/inference.yaml "
                            "--metrics_config conf/metrics.yaml", "all");
    char *err = log_of("all", "err");
    cr_assert_eq(rc, 0, "stages 1-8 failed:\n%s", err);
    /* The builder's lifecycle ran in Python (sph2pipe made the WAVs), the items were exported once. */
    cr_assert(strstr(err, "DatasetBuilder: source prepared, built"), "%s", err);
    cr_assert(test_exists(test_path(recipe, "data/manifest/train.tsv")));
    int tmp_left, n = count_exports(recipe, &tmp_left);
    cr_assert_eq(n, 3, "train, valid and test exports, got %d", n);
    cr_assert_eq(tmp_left, 0);
    /* The tokenizer trained on src.tokenizer's text, BPE 30. */
    cr_assert(strstr(err, "from 4 utterances in src.tokenizer.gather_training_text"), "%s", err);
    cr_assert(test_exists(test_path(recipe, "data/bpe_30/bpe.model")));
    /* Decoded, scored and packed under ESPnet3's exp/<config stem>/. */
    char exp[600];
    snprintf(exp, sizeof exp, "%s/exp/training_asr_transformer", recipe);
    cr_assert(test_exists(test_path(exp, "inference/test/hyp.scp")), "%s", err);
    /* conf/inference.yaml (ESPnet3's, byte for byte) decodes valid as well, through src.inference.build_output. */
    cr_assert(test_exists(test_path(exp, "inference/valid/hyp.scp")), "%s", err);
    cr_assert(strstr(err, "output_fn src.inference.build_output wrote"), "%s", err);
    cr_assert(test_exists(test_path(exp, "inference/metrics.json")));
    cr_assert(test_exists(test_path(exp, "model_pack")));
    free(err);

    /* ESPnet3's checkpoint names are there and unpickle as torch.load reads them (Python's pickle
     * with numpy standing in for torch): Lightning's dict for the .ckpt files, a state dict for the
     * average. */
    cr_assert_eq(test_sh("cd '%s' && /usr/bin/python3 '%s/test/fixtures/egs3/tools/torch_load_numpy.py' last.ckpt "
                         "epoch0_step1_valid.loss.ckpt valid.loss.ave_1best.pth > '%s/loaded' 2>&1",
                         exp, test_root_dir(), workdir),
                 0, "%s", test_slurp_or_empty(test_path(workdir, "loaded")));
    char *loaded = test_slurp(test_path(workdir, "loaded"));
    cr_assert(strstr(loaded, "last.ckpt: lightning epoch 0 global_step 1 state_dict 99 model.ctc.ctc_lo.bias"), "%s", loaded);
    cr_assert(strstr(loaded, "epoch0_step1_valid.loss.ckpt: lightning epoch 0 global_step 1"), "%s", loaded);
    cr_assert(strstr(loaded, "valid.loss.ave_1best.pth: state_dict 99 ctc.ctc_lo.bias"), "%s", loaded);
    free(loaded);
    /* An inference config naming ESPnet3's best-k file decodes what last decoded (one step). */
    cr_assert_eq(run_in(recipe, "--training_config conf/training_asr_transformer.yaml --inference_config conf/inference.yaml "
                                "--stages infer model.asr_model_file=exp/training_asr_transformer/epoch0_step1_valid.loss.ckpt "
                                "inference_dir=exp/by_name", "by_name"),
                 0, "%s", log_of("by_name", "err"));
    cr_assert(test_same_file(test_path(exp, "inference/test/hyp.scp"), test_path(recipe, "exp/by_name/test/hyp.scp")));

    /* The inference output_fn is the recipe's Python: its fields become the scp files (lib/ is not
     * part of what the exports' key hashes, so the checks below still find them made). */
    test_write_text_mkdirs(test_path(recipe, "lib/custom.py"),
                    "def output_fn(data, model_output, idx):\n"
                    "    hyp = model_output[0][0]\n"
                    "    return {'utt_id': data['utt_id'], 'hyp': hyp.lower(), 'ref': data['text'], 'words': len(hyp.split())}\n");
    cr_assert_eq(run_in(recipe, "--training_config conf/training_asr_transformer.yaml --inference_config conf/inference.yaml "
                                "output_fn=lib.custom.output_fn inference_dir=exp/custom --stages infer", "custom"),
                 0, "%s", log_of("custom", "err"));
    char *orig = test_slurp(test_path(exp, "inference/test/hyp.scp"));
    char *lower = test_slurp(test_path(recipe, "exp/custom/test/hyp.scp"));
    for (char *c = strchr(orig, ' '); c && *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    cr_assert_str_eq(lower, orig);
    free(orig), free(lower);
    char *words = test_slurp(test_path(recipe, "exp/custom/test/words.scp"));
    cr_assert(!strncmp(words, "test-000000 1\n", 14), "%s", words);
    free(words);

    /* The exported audio is the dataset's samples bit for bit (16-bit WAV read as int16 / 32768:
     * FLAC holds them exactly), in the builder's order. */
    manifest built, exported;
    esp_err e;
    cr_assert_eq(manifest_read_tsv(test_path(recipe, "data/manifest/train.tsv"), &built, &e), 0, "%s", e.msg);
    char *stderr_all = log_of("all", "err");
    char *p = strstr(stderr_all, "dataset.train[0]: exported");
    cr_assert(p);
    char *dir = strstr(p, " to ") + 4;
    *strstr(dir, " in ") = '\0';
    cr_assert_eq(manifest_read_tsv(test_path(dir, "manifest.tsv"), &exported, &e), 0, "%s", e.msg);
    cr_assert_eq(exported.n, built.n);
    for (size_t i = 0; i < built.n; i++) {
        float *a, *b;
        size_t na, nb;
        cr_assert_eq(audio_read(built.items[i].wav, 16000, "fs", &a, &na, &e), 0, "%s", e.msg);
        cr_assert_eq(audio_read(exported.items[i].wav, 16000, "fs", &b, &nb, &e), 0, "%s", e.msg);
        cr_assert_eq(na, nb);
        cr_assert_eq(memcmp(a, b, na * sizeof *a), 0, "item %zu differs", i);
        cr_assert_str_eq(built.items[i].text, exported.items[i].text);
        cr_assert(strstr(exported.items[i].wav, ".flac"), "%s", exported.items[i].wav);
        free(a), free(b);
    }
    manifest_free(&built);
    manifest_free(&exported);
    free(stderr_all);

    /* A second run exports nothing; touching the recipe's Python exports again. */
    cr_assert_eq(run_in(recipe, "--training_config conf/training_asr_transformer.yaml --stages create_dataset", "again"), 0);
    err = log_of("again", "err");
    cr_assert_null(strstr(err, "exported"), "%s", err);
    cr_assert(strstr(err, "source was prepared, already built"), "%s", err);
    free(err);
    cr_assert_eq(test_sh("touch '%s/dataset/dataset.py'", recipe), 0);
    cr_assert_eq(run_in(recipe, "--training_config conf/training_asr_transformer.yaml --stages create_dataset", "touched"), 0);
    err = log_of("touched", "err");
    cr_assert(strstr(err, "dataset.train[0]: exported 4 items"), "%s", err);
    free(err);
}

/* A user's recipe: a Python Dataset class named by its dotted path, no builder. */
static const char *user_dataset =
    "import numpy as np\n"
    "class Tones:\n"
    "    def __init__(self, n, fail_at=-1, no_speech_at=-1, fs=None):\n"
    "        self.n, self.fail_at, self.no_speech_at, self.fs = n, fail_at, no_speech_at, fs\n"
    "    def __len__(self):\n"
    "        return self.n\n"
    "    def __getitem__(self, i):\n"
    "        if i == self.fail_at:\n"
    "            raise ValueError('cannot read item %d' % i)\n"
    "        t = np.arange(480) / 16000.0\n"
    "        x = np.round(np.sin(2 * np.pi * (200 + i % 50) * t) * 8000) / 32768\n"
    "        item = {'speech': x.astype(np.float32), 'text': 'TONE %d' % (i % 7), 'utt_id': 'tone%05d' % i}\n"
    "        if i == self.no_speech_at:\n"
    "            del item['speech']\n"
    "        if self.fs:\n"
    "            item['fs'] = self.fs\n"
    "        return item\n";

static void write_user_recipe(const char *dir, const char *train_args, const char *data_src)
{
    test_write_text_mkdirs(test_path(dir, "tones.py"), user_dataset);
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "recipe_dir: .\ndata_dir: ${recipe_dir}/data\n"
             "dataset:\n  train:\n    - data_src: %s\n      data_src_args: %s\n"
             "  valid:\n    - data_src: tones.Tones\n      data_src_args: {n: 3}\n",
             data_src, train_args);
    test_write_text_mkdirs(test_path(dir, "conf/training.yaml"), yaml);
}

/* 10,000 items (issue 38); 2,000 in the sanitizer's run, which checks the same code (make asan runs
 * every test, and CI's time is bounded). */
Test(egs3, a_user_dataset_of_10000_items_exports_once_and_again_when_its_code_changes)
{
    const int n = test_sanitized() ? 2000 : 10000;
    char args[32], exported[64], last[16], text[16];
    snprintf(args, sizeof args, "{n: %d}", n);
    snprintf(exported, sizeof exported, "dataset.train[0]: exported %d items", n);
    snprintf(last, sizeof last, "tone%05d", n - 1);
    snprintf(text, sizeof text, "TONE %d", (n - 1) % 7); /* the Dataset's text of item i */
    const char *dir = test_path(workdir, "mine");
    write_user_recipe(dir, args, "tones.Tones");
    cr_assert_eq(run_in(dir, "--training_config conf/training.yaml --stages create_dataset", "first"), 0, "%s",
                 log_of("first", "err"));
    char *err = log_of("first", "err");
    cr_assert(strstr(err, exported), "%s", err);
    free(err);
    manifest m;
    esp_err e;
    char *found = NULL;
    cr_assert_eq(test_sh("ls -d '%s'/data/py_export/*/ | head -100 > '%s/list'", dir, workdir), 0);
    char *list = test_slurp(test_path(workdir, "list"));
    for (char *line = strtok(list, "\n"); line && !found; line = strtok(NULL, "\n"))
        if (manifest_read_tsv(test_path(line, "manifest.tsv"), &m, &e) == 0) {
            if (m.n == (size_t)n) found = line;
            else manifest_free(&m);
        }
    cr_assert(found);
    cr_assert_str_eq(m.items[n - 1].utt, last);
    cr_assert_str_eq(m.items[n - 1].text, text);
    manifest_free(&m);
    free(list);

    cr_assert_eq(run_in(dir, "--training_config conf/training.yaml --stages create_dataset", "second"), 0);
    err = log_of("second", "err");
    cr_assert_null(strstr(err, "exported"), "%s", err);
    free(err);
    cr_assert_eq(test_sh("touch '%s/tones.py'", dir), 0);
    cr_assert_eq(run_in(dir, "--training_config conf/training.yaml --stages create_dataset", "third"), 0);
    err = log_of("third", "err");
    cr_assert(strstr(err, exported), "%s", err);
    free(err);
}

/* One error line naming the config line of the Python, exit 1, no export folder left behind. */
static void bad_case(const char *tag, const char *train_args, const char *data_src, const char *env, const char *want)
{
    const char *dir = test_path(workdir, tag);
    write_user_recipe(dir, train_args, data_src);
    int rc = test_sh("cd '%s' && %s%s timeout 120 '%s' --training_config conf/training.yaml --stages "
                     "create_dataset >'%s/%s.out' 2>'%s/%s.err'",
                     dir, py_env(), env, test_bin_path(), workdir, tag, workdir, tag);
    char *err = log_of(tag, "err");
    cr_assert_eq(rc, 1, "%s: exit %d\n%s", tag, rc, err);
    const char *line = strstr(err, "espnet3: error: ");
    cr_assert(line, "%s: %s", tag, err);
    cr_assert_eq(test_count_lines(line), 1, "%s: one line: %s", tag, line);
    cr_assert(strstr(line, "espnet3: error: conf/training.yaml:5:7: dataset.train[0]: "), "%s: %s", tag, line);
    cr_assert(strstr(line, want), "%s: wanted '%s' in %s", tag, want, line);
    int tmp_left, n = count_exports(dir, &tmp_left);
    cr_assert_eq(n, 0, "%s: %d folders under data/py_export", tag, n);
    free(err);
}

Test(egs3, bad_python_is_one_error_line_and_nothing_half_written)
{
    bad_case("noimport", "{n: 3}", "nosuchpkg.Tones", "", "cannot import nosuchpkg (ModuleNotFoundError");
    bad_case("raises", "{n: 10, fail_at: 7}", "tones.Tones", "",
             "ValueError: cannot read item 7 (in the recipe's Python run by /usr/bin/python3, raised at ");
    bad_case("nospeech", "{n: 10, no_speech_at: 2}", "tones.Tones", "", "item 2 has no 'speech' (its keys: text, utt_id)");
    bad_case("rate", "{n: 4, fs: 8000}", "tones.Tones", "", "item 0 is at 8000 Hz and the frontend at 16000 Hz");
    bad_case("nopython", "{n: 3}", "tones.Tones", "ESPNET3_PYTHON=/nonexistent/python3",
             "cannot run the Python interpreter /nonexistent/python3: No such file or directory");
}

/* ESPnet3's TEMPLATE/asr and TEMPLATE/esp2_asr configs and mini_an4's esp2_asr ones pass --dry_run
 * with no warning: every key is implemented or changes nothing here. */
Test(egs3, template_and_esp2_asr_configs_pass_dry_run_without_a_warning)
{
    static const struct {
        const char *folder, *args;
    } cases[] = {
        {"TEMPLATE/asr", "--training_config conf/training.yaml --inference_config conf/inference.yaml"},
        {"TEMPLATE/esp2_asr", "--training_config conf/training.yaml --inference_config conf/inference.yaml "
                              "--metrics_config conf/metrics.yaml"},
        {"mini_an4/esp2_asr", "--training_config conf/training_asr_transformer.yaml --inference_config "
                              "conf/inference.yaml --metrics_config conf/metrics.yaml"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char dir[512], args[512], log[16];
        snprintf(dir, sizeof dir, "%s/egs3/%s", workdir, cases[i].folder);
        cr_assert_eq(test_sh("mkdir -p '%s' && cp -r '%s/test/fixtures/egs3/%s/conf' '%s/'", dir, test_root_dir(),
                             cases[i].folder, dir),
                     0);
        snprintf(args, sizeof args, "%s --dry_run", cases[i].args);
        snprintf(log, sizeof log, "dry%zu", i);
        int rc = run_in(dir, args, log);
        char *err = log_of(log, "err");
        cr_assert_eq(rc, 0, "%s: %s", cases[i].folder, err);
        cr_assert_null(strstr(err, "WARNING"), "%s: %s", cases[i].folder, err);
        free(err);
    }
}

/* The newest mini_an4 metrics.yaml stored anywhere (1b01e106) reads exp_tag from a training.yaml the
 * folder does not have; ESPnet3's run_utils reads that key before copying the training config's, so it
 * fails there; so does espnet3, in one line at the interpolation, before any stage. With a
 * training.yaml that sets exp_tag in the working directory (where ESPnet3's load_yaml looks) it passes. */
Test(egs3, espnet3s_stored_metrics_yaml_fails_on_its_missing_training_yaml_as_in_espnet3)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/egs3/mini_an4/asr_metrics", workdir);
    cr_assert_eq(test_sh("mkdir -p '%s' && cp -r '%s/test/fixtures/egs3/mini_an4/asr/conf' '%s/' && "
                         "cp '%s/test/fixtures/egs3/espnet3_mini_an4_metrics_1b01e106.yaml' '%s/conf/metrics.yaml'",
                         dir, test_root_dir(), dir, test_root_dir(), dir),
                 0);
    const char *args = "--training_config conf/training_asr_transformer.yaml --inference_config conf/inference.yaml "
                       "--metrics_config conf/metrics.yaml --stages measure --dry_run";
    cr_assert_neq(run_in(dir, args, "metrics_nofile"), 0);
    char *err = log_of("metrics_nofile", "err");
    cr_assert(strstr(err, "espnet3: error: conf/metrics.yaml:10:10: ${load_yaml:training.yaml,exp_tag}: cannot read "
                          "training.yaml"),
              "%s", err);
    cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "one line: %s", err);
    free(err);
    cr_assert_eq(test_sh("echo 'exp_tag: training_asr_transformer' > '%s/training.yaml'", dir), 0);
    int rc = run_in(dir, args, "metrics_file");
    err = log_of("metrics_file", "err");
    cr_assert_eq(rc, 0, "%s", err);
    free(err);
}

/* ESPnet3's esp2_asr naming end to end: its Inference API (text.scp), the best-k checkpoint by its
 * ESPnet3 name, a top-level batch_size, the esp2_asr WER/CER/TER with ref_key dataset:text; then
 * collect_stats_train_mode: the train split's statistics of augmented audio, valid's unchanged. */
Test(egs3, mini_an4_esp2_asr_runs_with_espnet3s_inference_api_checkpoint_names_and_ter)
{
    char recipe[512];
    snprintf(recipe, sizeof recipe, "%s/egs3/mini_an4/esp2_asr", workdir);
    /* The asr folder beside it too: ESPnet3's dataset.py imports egs3.mini_an4.asr.dataset.builder. */
    cr_assert_eq(test_sh("mkdir -p '%s' && cp -r '%s/test/fixtures/egs3/mini_an4/esp2_asr/conf' "
                         "'%s/test/fixtures/egs3/mini_an4/asr/dataset' '%s/test/fixtures/egs3/mini_an4/asr/src' '%s/' && "
                         "cp -r '%s/test/fixtures/egs3/mini_an4/asr' '%s/egs3/mini_an4/' && "
                         "cp '%s/recipes/mini_an4/downloads.tar.gz' '%s/'",
                         recipe, test_root_dir(), test_root_dir(), test_root_dir(), recipe, test_root_dir(), workdir,
                         test_root_dir(), recipe),
                 0);
    int rc = run_in(recipe, "--training_config conf/training_asr_transformer.yaml --inference_config conf/inference.yaml "
                            "--metrics_config conf/metrics.yaml", "esp2");
    char *err = log_of("esp2", "err");
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert(strstr(err, "infer: model ./exp/training_asr_transformer/epoch0_step1_valid.loss.ckpt"), "%s", err);
    free(err);
    const char *inf = test_path(recipe, "exp/training_asr_transformer/inference");
    cr_assert(test_same_file(test_path(inf, "test/text.scp"), test_path(inf, "test/hyp.scp")));
    cr_assert(test_exists(test_path(inf, "test/ter_alignment")));
    char *json = test_slurp(test_path(inf, "metrics.json"));
    cr_assert(strstr(json, "\"espnet3.systems.esp2_asr.metrics.ter.TER\"") && strstr(json, "\"TER\":"), "%s", json);
    cr_assert(strstr(json, "\"espnet3.systems.esp2_asr.metrics.wer.WER\""), "%s", json);
    free(json);

    cr_assert_eq(run_in(recipe, "--training_config conf/training_asr_transformer.yaml --stages collect_stats "
                                "collect_stats_train_mode=true stats_dir=exp/stats_aug", "aug"),
                 0, "%s", log_of("aug", "err"));
    err = log_of("aug", "err");
    cr_assert(strstr(err, "statistics of the augmented audio"), "%s", err);
    free(err);
    cr_assert(!test_same_file(test_path(recipe, "exp/stats/train/feats_stats.npz"),
                              test_path(recipe, "exp/stats_aug/train/feats_stats.npz")));
    cr_assert(test_same_file(test_path(recipe, "exp/stats/valid/feats_stats.npz"),
                             test_path(recipe, "exp/stats_aug/valid/feats_stats.npz")));
}

/* ESPnet3's publication: pack_model with mini_an4's publication.yaml makes the Hugging Face model
 * folder (the experiment, include globs, conf/ with paths into the folder, metrics.json, README
 * with the results table, meta.yaml), which decodes where it lies; upload_model without a Hugging
 * Face CLI names the folder that is ready; pack_demo's app.py runs the binary on the pack. */
Test(egs3, mini_an4_publication_packs_a_folder_that_decodes_and_a_demo_that_runs_espnet3)
{
    char recipe[512];
    copy_mini_an4(recipe, sizeof recipe);
    const char *all = "--training_config conf/training_asr_transformer.yaml --inference_config conf/inference.yaml "
                      "--metrics_config conf/metrics.yaml --publication_config conf/publication.yaml --demo_config "
                      "conf/demo.yaml";
    char args[1024];
    snprintf(args, sizeof args, "%s --stages create_dataset train_tokenizer collect_stats train infer measure pack_model "
                                "pack_demo", all);
    cr_assert_eq(run_in(recipe, args, "pub"), 0, "%s", log_of("pub", "err"));
    char pack[600];
    snprintf(pack, sizeof pack, "%s/exp/training_asr_transformer/model_pack", recipe);
    static const char *const want[] = {"exp/training_asr_transformer/last.ckpt", "exp/training_asr_transformer/config.yaml",
                                       "src/tokenizer.py", "data/bpe_30/bpe.model", "data/bpe_30/tokens.txt",
                                       "conf/training.yaml", "conf/inference.yaml", "conf/publication.yaml",
                                       "conf/metrics.yaml", "metrics.json", "README.md", "meta.yaml"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert(test_exists(test_path(pack, want[i])), "%s missing from the pack", want[i]);
    cr_assert(!test_exists(test_path(pack, "exp/training_asr_transformer/inference")), "excluded");
    cr_assert(!test_exists(test_path(pack, "exp/training_asr_transformer/.espnet3.lock")));
    char *readme = test_slurp(test_path(pack, "README.md"));
    cr_assert(strstr(readme, "| dataset | CER |") && strstr(readme, "| test | 373.13 |") && strstr(readme, "| 100.0 |"),
              "%s", readme);
    free(readme);
    char *inf = test_slurp(test_path(pack, "conf/inference.yaml"));
    cr_assert(strstr(inf, "asr_model_file: ${recipe_dir}/exp/training_asr_transformer/last.ckpt"), "%s", inf);
    free(inf);
    cr_assert_eq(test_sh("/usr/bin/python3 -c \"import json,sys; m=json.load(open(sys.argv[1])); "
                         "assert m['yaml_files']['inference_config']=='conf/inference.yaml', m\" '%s/meta.yaml'", pack),
                 0);

    /* The folder decodes where it lies: the same hypotheses for the same test manifest. */
    cr_assert_eq(test_sh("mkdir -p '%s/elsewhere/manifest' && cat '%s'/data/py_export/*/manifest.tsv | grep '^test-' "
                         "> '%s/elsewhere/manifest/test.tsv'", workdir, recipe, workdir),
                 0);
    snprintf(args, sizeof args, "--inference_config conf/inference.yaml '~dataset' test_sets=[test] "
                                "data_dir=%s/elsewhere inference_dir=%s/elsewhere/out --stages infer", workdir, workdir);
    cr_assert_eq(run_in(pack, args, "frompack"), 0, "%s", log_of("frompack", "err"));
    cr_assert(test_same_file(test_path(workdir, "elsewhere/out/test/hyp.scp"),
                             test_path(recipe, "exp/training_asr_transformer/inference/test/hyp.scp")));

    /* No Hugging Face CLI on PATH: one line naming the folder that is ready to upload. */
    cr_assert_eq(test_sh("cd '%s' && PATH=/nonexistent %s'%s' %s --stages upload_model >'%s/up.out' "
                         "2>'%s/up.err'",
                         recipe, py_env(), test_bin_path(), all, workdir, workdir),
                 1, "%s", log_of("up", "err"));
    char *up = log_of("up", "err");
    cr_assert(strstr(up, "espnet3: error: conf/publication.yaml:") && strstr(up, "model_pack is ready to upload") &&
                  strstr(up, "ms180/CI_mini_an4_training_asr_transformer"),
              "%s", up);
    free(up);

    /* The demo: app.py runs espnet3 on the pack and says what stage 6 said. */
    cr_assert(test_exists(test_path(recipe, "demo/model/conf/inference.yaml")));
    cr_assert_eq(test_sh("cd '%s' && f=$(grep '^test-000000' data/py_export/*/manifest.tsv | cut -f2) && "
                         "ESPNET3_BIN='%s' /usr/bin/python3 demo/app.py \"$f\" > '%s/demo.out' 2>&1",
                         recipe, test_bin_path(), workdir),
                 0, "%s", log_of("demo", "out"));
    char *said = log_of("demo", "out");
    char *hyp = test_slurp(test_path(recipe, "exp/training_asr_transformer/inference/test/hyp.scp"));
    char *first = strchr(hyp, ' ') + 1;
    first[strcspn(first, "\n")] = '\0';
    cr_assert(said[0] && !strncmp(said, first, strlen(first)), "app.py said '%s', stage 6 '%s'", said, first);
    free(said), free(hyp);
}

/* A dataset entry's transform (Hydra's {_target_, _partial_, kwargs}) runs on each item of a
 * Python entry at export; on a source espnet3 reads itself it is refused at its line. */
Test(egs3, a_transform_runs_on_python_items_and_is_refused_on_other_sources)
{
    const char *dir = test_path(workdir, "tf");
    write_user_recipe(dir, "{n: 3}", "tones.Tones");
    test_write_text(test_path(dir, "conf/training.yaml"),
                    "recipe_dir: .\ndata_dir: ${recipe_dir}/data\n"
                    "dataset:\n  train:\n    - data_src: tones.Tones\n      data_src_args: {n: 3}\n"
                    "      transform: {_target_: tones.prefixed, _partial_: true, prefix: 'X '}\n"
                    "  valid:\n    - data_src: tones.Tones\n      data_src_args: {n: 2}\n");
    char *with = xasprintf("%sdef prefixed(item, prefix):\n    item['text'] = prefix + item['text']\n    return item\n",
                           user_dataset);
    test_write_text(test_path(dir, "tones.py"), with);
    free(with);
    cr_assert_eq(run_in(dir, "--training_config conf/training.yaml --stages create_dataset", "tf"), 0, "%s",
                 log_of("tf", "err"));
    cr_assert_eq(test_sh("cat '%s'/data/py_export/*/manifest.tsv > '%s/all.tsv'", dir, workdir), 0);
    char *all = test_slurp(test_path(workdir, "all.tsv"));
    cr_assert(strstr(all, "tone00000\t") && strstr(all, "\tX TONE 0\n") && strstr(all, "\tTONE 1\n"), "%s", all);
    free(all);

    test_write_text(test_path(dir, "conf/manifest.yaml"),
                    "recipe_dir: .\ndata_dir: ${recipe_dir}/data\n"
                    "dataset:\n  train:\n    - data_src: manifest\n      data_src_args: {path: x.tsv}\n"
                    "      transform: {_target_: tones.prefixed}\n"
                    "  valid:\n    - data_src: manifest\n      data_src_args: {path: x.tsv}\n");
    cr_assert_eq(run_in(dir, "--training_config conf/manifest.yaml --stages create_dataset", "tfm"), 1);
    char *err = log_of("tfm", "err");
    cr_assert(strstr(err, "espnet3: error: conf/manifest.yaml:7:18: dataset.train[0].transform: a transform runs the "
                          "recipe's Python"),
              "%s", err);
    free(err);
}

/* ESPnet3's mini_an4 streaming config (conf/training_asr_streaming.yaml as it ships: the contextual
 * block Transformer with block_size 40, hop_size 16, look_ahead 16, the joint loss,
 * extract_feats_in_collect_stats false) runs stages 1-8 from the folder: stage 3 takes the
 * waveform's statistics as ESPnet2's collect_feats then does ("uid L" shapes, scalar sums), the
 * model file holds ContextualBlockTransformerEncoder's names, and conf/inference.yaml decodes it. */
Test(egs3, mini_an4_streaming_config_runs_stages_1_8)
{
    char recipe[512];
    copy_mini_an4(recipe, sizeof recipe);
    int rc = run_in(recipe, "--training_config conf/training_asr_streaming.yaml --inference_config conf/inference.yaml "
                            "--metrics_config conf/metrics.yaml", "stream");
    cr_assert_eq(rc, 0, "stages 1-8 failed:\n%s", log_of("stream", "err"));
    char exp[600];
    snprintf(exp, sizeof exp, "%s/exp/training_asr_streaming", recipe);
    cr_assert(test_exists(test_path(exp, "inference/test/hyp.scp")));
    cr_assert(test_exists(test_path(exp, "inference/metrics.json")));
    cr_assert(test_exists(test_path(exp, "model_pack")));
    char *cfg = test_slurp(test_path(exp, "config.yaml"));
    cr_assert(strstr(cfg, "encoder: contextual_block_transformer") && strstr(cfg, "look_ahead: 16"), "%s", cfg);
    free(cfg);
    char *shape = test_slurp(test_path(recipe, "exp/stats/train/feats_shape"));
    cr_assert(!strncmp(shape, "train-000000 11200\n", 19), "%s", shape);
    free(shape);
    npz_file z;
    esp_err e;
    cr_assert_eq(npz_read(test_path(recipe, "exp/stats/train/feats_stats.npz"), &z, &e), 0, "%s", e.msg);
    for (size_t i = 0; i < z.n; i++) cr_assert_eq(z.arrays[i].ndim, 0, "%s", z.arrays[i].name);
    npz_free(&z);
    st_file f;
    cr_assert_eq(st_read(test_path(exp, "last/model.safetensors"), &f, &e), 0, "%s", e.msg);
    cr_assert_not_null(st_get(&f, "encoder.embed.out.weight"));
    cr_assert_not_null(st_get(&f, "encoder.encoders.0.norm2.bias"));
    st_close(&f);
    /* The averaged model and the pack's ESPnet state dict keep that name (both once said out.0, which
     * neither espnet3's loader nor ESPnet's load_state_dict took for this encoder). */
    const char *kept[] = {"valid.loss.ave.safetensors", "model_pack/espnet/exp/asr_train/valid.loss.ave.pth"};
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) {
        cr_assert_eq(model_weights_open(test_path(exp, kept[i]), &f, &e), 0, "%s", e.msg);
        cr_assert_not_null(st_get(&f, "encoder.embed.out.weight"), "%s", kept[i]);
        cr_assert_null(st_get(&f, "encoder.embed.out.0.weight"), "%s", kept[i]);
        st_close(&f);
    }
}

/* ESPnet3's mini_an4 default: conf/training.yaml, a link to training_transducer_asr_conformer_rnnt.yaml
 * (ESPnet2's asr_transducer task: one conformer block of body_conf, hidden 2, an RNN decoder of 4
 * units, joint_network_conf; the model section as ESPnet3 ships it, the rest in this folder's
 * generation), runs stages 1-8 with no --training_config and conf/inference_transducer.yaml
 * (asr_transducer_inference.Speech2Text, beam_size 1: its default beam search with a beam of one):
 * the model file holds the asr_transducer task's parameter names. */
Test(egs3, mini_an4_default_training_yaml_is_the_asr_transducer_task)
{
    char recipe[512];
    copy_mini_an4(recipe, sizeof recipe);
    int rc = run_in(recipe, "--inference_config conf/inference_transducer.yaml --metrics_config conf/metrics.yaml",
                    "body");
    cr_assert_eq(rc, 0, "stages 1-8 failed:\n%s", log_of("body", "err"));
    char exp[600];
    snprintf(exp, sizeof exp, "%s/exp/training", recipe);
    cr_assert(test_exists(test_path(exp, "inference_transducer/test/hyp.scp")), "%s", log_of("body", "err"));
    cr_assert(test_exists(test_path(exp, "inference_transducer/metrics.json")));
    cr_assert(test_exists(test_path(exp, "model_pack")));
    /* The config has no normalize: ASRTransducerTask's default, utterance_mvn, as ESPnet3 builds it. */
    char *cfg = test_slurp(test_path(exp, "config.yaml"));
    cr_assert(strstr(cfg, "body_conf:") && strstr(cfg, "joint_network_conf:"), "%s", cfg);
    cr_assert(strstr(cfg, "  normalize: utterance_mvn\n"), "%s", cfg);
    free(cfg);
    /* The pack's ESPnet2 side is the asr_transducer task's, and its README says how to load it. */
    char *esp = test_slurp(test_path(exp, "model_pack/espnet/exp/asr_train/config.yaml"));
    cr_assert(strstr(esp, "ASRTransducerTask") && strstr(esp, "decoder: rnn") && !strstr(esp, "joint_net_conf"), "%s",
              esp);
    cr_assert(strstr(esp, "\nnormalize: utterance_mvn\n"), "%s", esp);
    free(esp);
    char *readme = test_slurp(test_path(exp, "model_pack/README.md"));
    cr_assert(strstr(readme, "asr_transducer_inference import Speech2Text") && strstr(readme, "num_blocks 1, output_size 2"),
              "%s", readme);
    free(readme);
    char *err = log_of("body", "err");
    cr_assert(strstr(err, " transducer "), "the step's log has no transducer loss:\n%s", err);
    free(err);
    st_file f;
    esp_err e;
    cr_assert_eq(st_read(test_path(exp, "last/model.safetensors"), &f, &e), 0, "%s", e.msg);
    static const char *const names[] = {"encoder.embed.output.weight", "encoder.encoders.blocks.0.self_att.linear_q.weight",
                                        "encoder.encoders.blocks.0.conv_mod.norm.running_var",
                                        "encoder.encoders.norm_blocks.weight", "decoder.rnn.0.weight_ih_l0",
                                        "joint_network.lin_out.weight"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) cr_assert_not_null(st_get(&f, names[i]), "%s", names[i]);
    cr_assert_null(st_get(&f, "ctc_lin.weight")); /* auxiliary_ctc_weight 0: no CTC head */
    st_close(&f);
}

/* The file's text holds every one of the NULL-ended strings. */
static void assert_text_has(const char *path, const char *const *want)
{
    char *text = test_slurp(path);
    for (; *want; want++) cr_assert(strstr(text, *want), "%s lacks %s:\n%s", path, *want, text);
    free(text);
}

/* run_in, which must succeed. */
static void run_ok(const char *dir, const char *args, const char *log)
{
    cr_assert_eq(run_in(dir, args, log), 0, "espnet3 %s failed:\n%s", args, log_of(log, "err"));
}

/* The same with model_conf's FastEmit (fastemit_lambda 0.01) and auxiliary LM loss
 * (auxiliary_lm_loss_weight 0.3) as overrides of the training config (stages 1-5; the overrides
 * would reach the inference config too): it trains, logs train/ and valid/loss_aux_lm, and the
 * model file holds lm_lin; then stage 8 packs it from the experiment's config, the ESPnet2 side's
 * model_conf saying so (ESPnet2 builds lm_lin from it). */
Test(egs3, mini_an4_asr_transducer_fastemit_and_aux_lm_loss_train_and_pack)
{
    char recipe[512], exp[600];
    copy_mini_an4(recipe, sizeof recipe);
    snprintf(exp, sizeof exp, "%s/exp/training", recipe);
    run_ok(recipe, "--training_config conf/training.yaml --stop_stage 5 +model.model_conf.fastemit_lambda=0.01 "
                   "+model.model_conf.auxiliary_lm_loss_weight=0.3", "auxlm");
    static const char *const logged[] = {"train/loss_aux_lm", "valid/loss_aux_lm", NULL};
    static const char *const lm_lin[] = {"lm_lin.weight", "lm_lin.bias", NULL};
    static const char *const conf[] = {"auxiliary_lm_loss_weight: 0.3", "fastemit_lambda: 0.01", NULL};
    assert_text_has(test_path(exp, "metrics.csv"), logged);
    st_file f;
    esp_err e;
    cr_assert_eq(st_read(test_path(exp, "last/model.safetensors"), &f, &e), 0, "%s", e.msg);
    for (const char *const *n = lm_lin; *n; n++) cr_assert_not_null(st_get(&f, *n), "%s", *n);
    st_close(&f);
    run_ok(recipe, "--training_config conf/training.yaml --inference_config conf/inference_transducer.yaml "
                   "--stage 8 --stop_stage 8", "auxlm8");
    assert_text_has(test_path(exp, "model_pack/espnet/exp/asr_train/config.yaml"), conf);
}

/* The default config with three conformer blocks and main_conf's blockdrop_rate and dynamic chunk
 * training (short_chunk_size 4, num_left_chunks 1; conf/training_chunk.yaml written from it):
 * stages 1-8 run (decoding full-context with the causal convolutions), the resolved config keeps the
 * keys, the pack's ESPnet2 config carries them; a second epoch resumed from the first gives the model
 * of two epochs trained at once, bit for bit (the skipped blocks and chunks follow the batch seed). */
Test(egs3, mini_an4_asr_transducer_blockdrop_and_dynamic_chunks_run_stages_1_8)
{
    char recipe[512], exp[600];
    copy_mini_an4(recipe, sizeof recipe);
    char *yaml = test_slurp(test_path(recipe, "conf/training_transducer_asr_conformer_rnnt.yaml"));
    const char *at = strstr(yaml, "  decoder_conf:"), *mk = "          conv_mod_kernel_size: 3\n";
    cr_assert(at && strstr(yaml, mk), "the config changed:\n%s", yaml);
    char *out = malloc(strlen(yaml) + 512);
    snprintf(out, strlen(yaml) + 512, "%.*s          num_blocks: 3\n    main_conf:\n      blockdrop_rate: 0.5\n"
             "      dynamic_chunk_training: true\n      short_chunk_size: 4\n      num_left_chunks: 1\n\n%s",
             (int)(strstr(yaml, mk) + strlen(mk) - yaml), yaml, at);
    test_write_text(test_path(recipe, "conf/training_chunk.yaml"), out);
    free(out), free(yaml);
    run_ok(recipe, "--training_config conf/training_chunk.yaml --inference_config conf/inference_transducer.yaml "
                   "--metrics_config conf/metrics.yaml", "chunk");
    snprintf(exp, sizeof exp, "%s/exp/training_chunk", recipe);
    cr_assert(test_exists(test_path(exp, "inference_transducer/test/hyp.scp")), "%s", log_of("chunk", "err"));
    static const char *const keys[] = {"blockdrop_rate: 0.5", "dynamic_chunk_training: true", "short_chunk_size: 4",
                                       "num_left_chunks: 1", "num_blocks: 3", NULL};
    assert_text_has(test_path(exp, "config.yaml"), keys);
    assert_text_has(test_path(exp, "model_pack/espnet/exp/asr_train/config.yaml"), keys);
    char fresh[700], args[900];
    run_ok(recipe, "--training_config conf/training_chunk.yaml --stage 5 --stop_stage 5 trainer.max_epochs=2", "chunk2");
    snprintf(fresh, sizeof fresh, "%s/exp/fresh", recipe);
    snprintf(args, sizeof args, "--training_config conf/training_chunk.yaml --stage 5 --stop_stage 5 "
             "trainer.max_epochs=2 exp_dir=%s", fresh);
    run_ok(recipe, args, "fresh");
    cr_assert(test_same_file(test_path(exp, "last/model.safetensors"), test_path(fresh, "last/model.safetensors")),
              "the resumed model differs from the one trained at once");
}

/* The same config with the contextual block Conformer (model.encoder and its Conformer keys as
 * overrides: macaron, the convolution module of kernel 3) trains, decodes and packs from the
 * folder; the model file holds ContextualBlockConformerEncoder's names. */
Test(egs3, mini_an4_streaming_conformer_runs_stages_1_8)
{
    char recipe[512];
    copy_mini_an4(recipe, sizeof recipe);
    int rc = run_in(recipe, "--training_config conf/training_asr_streaming.yaml --inference_config conf/inference.yaml "
                            "--metrics_config conf/metrics.yaml model.encoder=contextual_block_conformer "
                            "model.encoder_conf.macaron_style=true model.encoder_conf.cnn_module_kernel=3",
                    "streamc");
    cr_assert_eq(rc, 0, "stages 1-8 failed:\n%s", log_of("streamc", "err"));
    char exp[600];
    snprintf(exp, sizeof exp, "%s/exp/training_asr_streaming", recipe);
    cr_assert(test_exists(test_path(exp, "inference/test/hyp.scp")));
    cr_assert(test_exists(test_path(exp, "model_pack")));
    char *cfg = test_slurp(test_path(exp, "config.yaml"));
    cr_assert(strstr(cfg, "encoder: contextual_block_conformer") && strstr(cfg, "macaron_style: true"), "%s", cfg);
    free(cfg);
    st_file f;
    esp_err e;
    cr_assert_eq(st_read(test_path(exp, "last/model.safetensors"), &f, &e), 0, "%s", e.msg);
    static const char *const names[] = {"encoder.encoders.0.norm1.weight", "encoder.encoders.0.norm2.bias",
                                        "encoder.encoders.0.feed_forward_macaron.w_1.weight",
                                        "encoder.encoders.0.conv_module.depthwise_conv.weight",
                                        "encoder.encoders.0.conv_module.norm.running_var",
                                        "encoder.encoders.0.norm_final.bias"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) cr_assert_not_null(st_get(&f, names[i]), "%s", names[i]);
    st_close(&f);
}

/* The same default with its RNNDecoder's rnn_type gru and embed_size 3 (hidden_size 4) from the
 * command line: stages 1-8 run (the asr_transducer search over GRU states), and the model file holds
 * torch.nn.GRU's tensors under the task's names, the first layer from the embedding's width (a pack
 * of this loads into ASRTransducerTask.build_model_from_file with strict=True: checked by hand, ESPnet
 * is not a test dependency). */
Test(egs3, mini_an4_asr_transducer_gru_decoder_runs_stages_1_8)
{
    char recipe[512];
    copy_mini_an4(recipe, sizeof recipe);
    int rc = run_in(recipe,
                    "--inference_config conf/inference_transducer.yaml --metrics_config conf/metrics.yaml "
                    "model.decoder_conf.rnn_type=gru model.decoder_conf.embed_size=3",
                    "gru");
    cr_assert_eq(rc, 0, "stages 1-8 failed:\n%s", log_of("gru", "err"));
    char exp[600];
    snprintf(exp, sizeof exp, "%s/exp/training", recipe);
    cr_assert(test_exists(test_path(exp, "inference_transducer/test/hyp.scp")));
    cr_assert(test_exists(test_path(exp, "model_pack")));
    st_file f;
    esp_err e;
    cr_assert_eq(st_read(test_path(exp, "last/model.safetensors"), &f, &e), 0, "%s", e.msg);
    static const struct {
        const char *name;
        int64_t rows, cols;
    } want[] = {{"decoder.embed.weight", 0, 3},
                {"decoder.rnn.0.weight_ih_l0", 12, 3}, /* 3 x hidden_size rows: r, z, n */
                {"decoder.rnn.0.weight_hh_l0", 12, 4}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const st_tensor *t = st_get(&f, want[i].name);
        cr_assert_not_null(t, "%s", want[i].name);
        cr_assert(t->ndim == 2 && (!want[i].rows || t->shape[0] == want[i].rows) && t->shape[1] == want[i].cols,
                  "%s: %lld x %lld", want[i].name, (long long)t->shape[0], (long long)t->shape[1]);
    }
    st_close(&f);
}

/* ESPnet3's mini_an4 transducer config (conf/training_asr_transducer.yaml as it ships: the ASR task
 * with decoder: transducer, an LSTM prediction network of 4 units, joint_net_conf, ctc_weight 0.3)
 * runs stages 1-8 from the folder with conf/inference.yaml (as ESPnet3's test script pairs them:
 * beam_size 1, Speech2Text's greedy transducer search): the model file holds ESPnet2's names of the
 * decoder and the joint network, the logs loss_transducer. */
Test(egs3, mini_an4_transducer_config_runs_stages_1_8)
{
    char recipe[512];
    copy_mini_an4(recipe, sizeof recipe);
    int rc = run_in(recipe,
                    "--training_config conf/training_asr_transducer.yaml --inference_config conf/inference.yaml "
                    "--metrics_config conf/metrics.yaml",
                    "transducer");
    cr_assert_eq(rc, 0, "stages 1-8 failed:\n%s", log_of("transducer", "err"));
    char exp[600];
    snprintf(exp, sizeof exp, "%s/exp/training_asr_transducer", recipe);
    cr_assert(test_exists(test_path(exp, "inference/test/hyp.scp")));
    cr_assert(test_exists(test_path(exp, "inference/metrics.json")));
    cr_assert(test_exists(test_path(exp, "model_pack")));
    char *cfg = test_slurp(test_path(exp, "config.yaml"));
    cr_assert(strstr(cfg, "decoder: transducer") && strstr(cfg, "joint_space_size: 4"), "%s", cfg);
    free(cfg);
    char *err = log_of("transducer", "err");
    cr_assert(strstr(err, "(ctc ") && strstr(err, " transducer "), "the step's log has no loss parts:\n%s", err);
    cr_assert_null(strstr(err, "training is CTC only"), "%s", err); /* ctc_weight 0.3 is the transducer's share */
    free(err);
    st_file f;
    esp_err e;
    cr_assert_eq(st_read(test_path(exp, "last/model.safetensors"), &f, &e), 0, "%s", e.msg);
    static const char *const names[] = {"decoder.embed.weight",         "decoder.decoder.0.weight_ih_l0",
                                        "decoder.decoder.0.bias_hh_l0", "joint_network.lin_enc.weight",
                                        "joint_network.lin_dec.bias",   "joint_network.lin_out.weight",
                                        "ctc.ctc_lo.weight"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) cr_assert_not_null(st_get(&f, names[i]), "%s", names[i]);
    st_close(&f);
}

/* mini_an4's asr_transducer config with an Encoder of four block types (a conv1d block of kernel 1
 * with BatchNorm1d first, after a ConvInput without its output Linear, a conformer block of 2, a
 * conv1d block 2 -> 4 of kernel 3 and stride 2 that shrinks the frames, an ebranchformer and a
 * branchformer block of 4, each with its own linear_size, heads and kernel; core/nn/encoder_body.c)
 * runs stages 1-8: the model file names each block after its kind, the pack's ESPnet2 state dict
 * holds the same names, and espnet3 transcribes a test utterance from the pack's ESPnet2 side
 * (its config.yaml and .pth) as from the experiment. */
Test(egs3, mini_an4_asr_transducer_blocks_of_four_types_run_stages_1_8_and_cross_the_pth)
{
    char recipe[512], exp[600];
    copy_mini_an4(recipe, sizeof recipe);
    cr_assert_eq(test_sh("cd '%s/conf' && sed '/^    body_conf:/,/^$/c\\\n"
                         "    body_conf:\\\n"
                         "      - {block_type: conv1d, output_size: 2, kernel_size: 1, batch_norm: true}\\\n"
                         "      - {block_type: conformer, hidden_size: 2, linear_size: 4, heads: 2, "
                         "conv_mod_kernel_size: 3}\\\n"
                         "      - {block_type: conv1d, output_size: 4, kernel_size: 3, stride: 2, relu: false}\\\n"
                         "      - {block_type: ebranchformer, hidden_size: 4, linear_size: 6, heads: 1, "
                         "conv_mod_kernel_size: 3, depth_conv_kernel_size: 5}\\\n"
                         "      - {block_type: branchformer, hidden_size: 4, linear_size: 4, heads: 2, "
                         "conv_mod_kernel_size: 5}\\\n"
                         "' training_transducer_asr_conformer_rnnt.yaml >training_mixed.yaml",
                         recipe),
                 0);
    run_ok(recipe, "--training_config conf/training_mixed.yaml --inference_config conf/inference_transducer.yaml "
                   "--metrics_config conf/metrics.yaml", "mixed");
    snprintf(exp, sizeof exp, "%s/exp/training_mixed", recipe);
    cr_assert(test_exists(test_path(exp, "inference_transducer/test/hyp.scp")), "%s", log_of("mixed", "err"));
    static const char *const names[] = {"encoder.encoders.blocks.1.conv_mod.norm.running_var",
                                        "encoder.encoders.blocks.1.norm_macaron.weight",
                                        "encoder.encoders.blocks.0.conv.weight",
                                        "encoder.encoders.blocks.0.bn.running_var",
                                        "encoder.encoders.blocks.0.out_pos.weight",
                                        "encoder.encoders.blocks.3.conv_mod.conv.weight",
                                        "encoder.encoders.blocks.3.depthwise_conv_mod.conv.weight",
                                        "encoder.encoders.blocks.3.norm_feed_forward_macaron.weight",
                                        "encoder.encoders.blocks.2.conv.weight",
                                        "encoder.encoders.blocks.2.out_pos.weight",
                                        "encoder.encoders.blocks.4.channel_proj1.0.weight",
                                        "encoder.encoders.blocks.4.merge_proj.weight"};
    const char *files[] = {"last/model.safetensors", "model_pack/espnet/exp/asr_train/valid.loss.ave.pth"};
    for (size_t k = 0; k < 2; k++) {
        st_file f;
        esp_err e;
        cr_assert_eq(model_weights_open(test_path(exp, files[k]), &f, &e), 0, "%s", e.msg);
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
            cr_assert_not_null(st_get(&f, names[i]), "%s: %s", files[k], names[i]);
        cr_assert_null(st_get(&f, "encoder.encoders.blocks.4.depthwise_conv_mod.conv.weight"), "%s", files[k]);
        cr_assert_null(st_get(&f, "encoder.encoders.blocks.4.feed_forward.w_1.weight"), "%s", files[k]);
        cr_assert_null(st_get(&f, "encoder.embed.output.weight"), "%s: ConvInput has no Linear", files[k]);
        const st_tensor *w = st_get(&f, "encoder.encoders.blocks.2.out_pos.weight");
        const st_tensor *n = st_get(&f, "encoder.encoders.norm_blocks.weight"), *j = st_get(&f, "joint_network.lin_enc.weight");
        cr_assert(w && w->shape[0] == 4 && w->shape[1] == 2 && n && n->shape[0] == 4 && j && j->shape[1] == 4,
                  "%s: the widths", files[k]);
        st_close(&f);
    }
    static const char *const readme[] = {"mixed-block", "(the largest of its blocks')", NULL};
    assert_text_has(test_path(exp, "model_pack/README.md"), readme);
    cr_assert_eq(test_sh("cd '%s' && w=$(find . -name '*.wav' | sort | head -1) && test -n \"$w\" && "
                         "'%s' transcribe exp/training_mixed \"$w\" >ours.txt 2>ours.err && "
                         "'%s' transcribe exp/training_mixed/model_pack/espnet/exp/asr_train \"$w\" >pth.txt "
                         "2>pth.err && test -s ours.txt && cmp ours.txt pth.txt",
                         recipe, test_bin_path(), test_bin_path()),
                 0, "transcripts differ or failed:\n%s\n%s", test_slurp_or_empty(test_path(recipe, "ours.err")),
                 test_slurp_or_empty(test_path(recipe, "pth.err")));
    /* 0.1 s leaves the stride-2 conv1d block one frame, fewer than its kernel: an error, not an abort */
    cr_assert_neq(test_sh("cd '%s' && sox -n -r 16000 -c 1 -b 16 short.wav synth 0.1 sine 440 && "
                          "'%s' transcribe exp/training_mixed short.wav >short.txt 2>short.err",
                          recipe, test_bin_path()),
                  0);
    char *e = test_slurp(test_path(recipe, "short.err"));
    cr_assert(strstr(e, "espnet3: error: ") && strstr(e, "shorter than the encoder's conv1d blocks need"), "%s", e);
    free(e);
}
