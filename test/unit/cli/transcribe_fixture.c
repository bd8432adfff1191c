/* The models of the transcribe and library tests; see transcribe_fixture.h. */
#include "test/unit/cli/transcribe_fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/test_util.h"

/* ESPnet's hypotheses (hyps.txt: "espnet_model 4 0.3 uttN ids|text"). */
static void read_hyps(tr_fixture *f, const char *root)
{
    char path[600];
    snprintf(path, sizeof path, "%s/hyps.txt", root);
    char *hyps = test_slurp(path), *save = NULL;
    int found = 0;
    for (char *line = strtok_r(hyps, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int utt;
        char ids[64], text[64];
        if (sscanf(line, "espnet_model 4 0.3 utt%d %63[^|]|%63[^\n]", &utt, ids, text) != 3 || utt < 1 || utt > 3)
            continue;
        snprintf(f->ids[utt - 1], sizeof f->ids[0], "%s", ids);
        snprintf(f->text[utt - 1], sizeof f->text[0], "%s", text);
        found++;
    }
    free(hyps);
    cr_assert_eq(found, 3, "hyps.txt: %d beam-4 lines of espnet_model", found);
}

void tr_fixture_make(tr_fixture *f)
{
    memset(f, 0, sizeof *f);
    test_tmpdir_make(f->dir, sizeof f->dir, "transcribe");
    char root[400];
    char *r = realpath(test_path(test_root_dir(), "test/fixtures/interop"), NULL);
    cr_assert_not_null(r);
    snprintf(root, sizeof root, "%s", r);
    free(r);
    snprintf(f->espnet, sizeof f->espnet, "%s/espnet_model", root);
    snprintf(f->exp, sizeof f->exp, "%s/exp/asr_train", f->espnet);
    snprintf(f->pack, sizeof f->pack, "%s/exp/model_pack", f->dir);
    snprintf(f->pack_zip, sizeof f->pack_zip, "%s/pack.zip", f->dir);
    snprintf(f->espnet2_zip, sizeof f->espnet2_zip, "%s/espnet2.zip", f->dir);
    for (int i = 0; i < 3; i++) snprintf(f->wav[i], sizeof f->wav[i], "%s/wav/utt%d.wav", root, i + 1);
    read_hyps(f, root);
    char yaml[1600];
    snprintf(yaml, sizeof yaml,
             "exp_dir: %s/exp\nmodel:\n  asr_train_config: %s/config.yaml\n  asr_model_file: %s/valid.acc.ave.pth\n"
             "  beam_size: 4\n  ctc_weight: 0.3\n",
             f->dir, f->exp, f->exp);
    test_write_text(test_path(f->dir, "inference.yaml"), yaml);
    cr_assert_eq(test_sh("cd '%s' && '%s' -q --template_dir '%s/conf' --inference_config '%s/inference.yaml' --stages "
                         "pack_model >'%s/pack.log' 2>&1",
                         f->espnet, test_bin_path(), test_root_dir(), f->dir, f->dir),
                 0, "pack_model: %s", test_slurp_or_empty(test_path(f->dir, "pack.log")));
    char code[1200];
    snprintf(code, sizeof code,
             "import os, zipfile\n"
             "def pack(src, dst, prefix):\n"
             "    with zipfile.ZipFile(dst, 'w', zipfile.ZIP_DEFLATED) as z:\n"
             "        for d, _, fs in os.walk(src):\n"
             "            for n in fs:\n"
             "                p = os.path.join(d, n)\n"
             "                z.write(p, os.path.join(prefix, os.path.relpath(p, src)))\n"
             "pack('%s', 'pack.zip', 'model_pack')\n"
             "pack('%s', 'espnet2.zip', '')\n",
             f->pack, f->espnet);
    cr_assert_eq(test_run_python(f->dir, code), 0);
}

void tr_fixture_free(tr_fixture *f) { test_tmpdir_remove(f->dir); }
