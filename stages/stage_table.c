#include "stages/stages.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"

static char *data_dir_of(const esp_configs *c)
{
    const training_cfg *t = training_of(c);
    return xstrdup(t && t->data_dir ? t->data_dir : ".");
}

static char *tokenizer_dir_of(const esp_configs *c)
{
    const training_cfg *t = training_of(c);
    if (t && t->tokenizer && t->tokenizer->save_path) return xstrdup(t->tokenizer->save_path);
    return data_dir_of(c);
}

static char *stats_dir_of(const esp_configs *c)
{
    const training_cfg *t = training_of(c);
    return xstrdup(t && t->stats_dir ? t->stats_dir : ".");
}

static char *exp_dir_of(const esp_configs *c)
{
    const training_cfg *t = training_of(c);
    return xstrdup(t && t->exp_dir ? t->exp_dir : ".");
}

/* Where stage 6 left <test>/hyp.scp: the metrics config's inference_dir. */
static char *metrics_inference_dir_of(const esp_configs *c)
{
    const metrics_cfg *m = c->metrics ? c->metrics->typed : NULL;
    return xstrdup(m && m->inference_dir ? m->inference_dir : ".");
}

static const inference_cfg *inference_of(const esp_configs *c)
{
    return c->inference ? (const inference_cfg *)c->inference->typed : NULL;
}

static char *inference_dir_of(const esp_configs *c)
{
    const inference_cfg *i = inference_of(c);
    return xstrdup(i && i->inference_dir ? i->inference_dir : ".");
}

static char *model_pack_dir_of(const esp_configs *c)
{
    const publication_cfg *p = c->publication ? c->publication->typed : NULL;
    if (p && p->pack_model && p->pack_model->out_dir) return path_dirname(p->pack_model->out_dir);
    const inference_cfg *i = inference_of(c);
    return xasprintf("%s/model_pack", i && i->exp_dir ? i->exp_dir : ".");
}

/* The publication stages log beside what they make: the pack's folder, the demo's. */
static char *publication_dir_of(const esp_configs *c)
{
    const publication_cfg *p = c->publication ? c->publication->typed : NULL;
    return xstrdup(p && p->exp_dir ? p->exp_dir : ".");
}

static char *demo_dir_of(const esp_configs *c)
{
    const demo_cfg *d = c->demo ? c->demo->typed : NULL;
    return path_dirname(d && d->pack && d->pack->out_dir ? d->pack->out_dir : "./demo");
}

const esp_config *stage_config(const stage_def *s, const esp_configs *c)
{
    if (s->needs == NEEDS_PACK) return c->publication ? c->publication : c->inference;
    return configs_get(c, (config_kind)s->needs);
}

const char *stage_config_option(const stage_def *s)
{
    return s->needs == NEEDS_PACK ? "--publication_config (or --inference_config)"
                                  : config_kind_option((config_kind)s->needs);
}

/* Only stages this build implements are listed; numbers keep DESIGN.md's table. */
const stage_def stage_table[] = {
    {1, "create_dataset", NULL, NEEDS_TRAINING, 0, "build the recipe's dataset and manifests", stage_create_dataset,
     data_dir_of, NULL},
    {2, "train_tokenizer", NULL, NEEDS_TRAINING, 0, "build the token list", stage_train_tokenizer, tokenizer_dir_of, NULL},
    {3, "collect_stats", NULL, NEEDS_TRAINING, 0, "feature shapes and global mean/variance sums", stage_collect_stats,
     stats_dir_of, NULL},
    {5, "train", NULL, NEEDS_TRAINING, STAGE_SPAWNS_RANKS | STAGE_NEEDS_BACKEND,
     "train the model (one rank or several: ddp, fsdp)", stage_train, exp_dir_of, stage_train_check},
    {6, "infer", "decode", NEEDS_INFERENCE, STAGE_NEEDS_BACKEND,
     "decode the test sets (greedy or prefix beam CTC, joint CTC/attention beam search)", stage_infer,
     inference_dir_of, NULL},
    {7, "measure", "score", NEEDS_METRICS, 0, "WER/CER of each test set's hypotheses, as sclite scores them",
     stage_measure, metrics_inference_dir_of, NULL},
    {8, "pack_model", NULL, NEEDS_PACK, 0,
     "the model folder ${exp_dir}/model_pack (ESPnet3's Hugging Face folder with a publication config)",
     stage_pack_model, model_pack_dir_of, NULL},
    {9, "upload_model", NULL, NEEDS_PUBLICATION, 0, "upload the model folder to upload_model.hf_repo",
     stage_upload_model, publication_dir_of, NULL},
    {10, "pack_demo", NULL, NEEDS_DEMO, 0, "a demo folder whose app runs espnet3 on the packed model", stage_pack_demo,
     demo_dir_of, NULL},
    {11, "upload_demo", NULL, NEEDS_DEMO, 0, "upload the demo folder to upload_demo.hf_repo (a Space)",
     stage_upload_demo, demo_dir_of, NULL},
};
const int stage_count = (int)(sizeof stage_table / sizeof *stage_table);

const stage_def *stage_by_name(const char *name)
{
    for (int i = 0; i < stage_count; i++) {
        const stage_def *s = &stage_table[i];
        if (!strcmp(s->name, name) || (s->alias && !strcmp(s->alias, name))) return s;
    }
    return NULL;
}

const stage_def *stage_by_number(int number)
{
    for (int i = 0; i < stage_count; i++)
        if (stage_table[i].number == number) return &stage_table[i];
    return NULL;
}

int stage_backend(const stage_def *s, const esp_configs *c, backend_kind *out, esp_err *err)
{
    *out = BACKEND_CPU;
    if (!(s->flags & STAGE_NEEDS_BACKEND)) return 0;
    const char *key, *accelerator;
    const esp_config *cfg;
    if (s->needs == NEEDS_TRAINING) {
        const training_cfg *t = training_of(c);
        key = "trainer.accelerator", cfg = c->training;
        accelerator = t && t->trainer ? t->trainer->accelerator : NULL;
    } else {
        const inference_cfg *i = inference_of(c);
        key = "model.device", cfg = c->inference;
        accelerator = i && i->model ? i->model->device : NULL;
    }
    esp_err why;
    if (backend_kind_for(accelerator, out, &why) == 0) return 0;
    if (!cfg) return esp_fail(err, "%s: %s", key, why.msg);
    char *where = config_where(cfg, key); /* "file:line:col: key" */
    esp_fail(err, "%s: %s", where, why.msg);
    free(where);
    return -1;
}
