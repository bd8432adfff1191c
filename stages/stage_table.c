#include "stages.h"

#include <string.h>

#include "../core/fsio.h"

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

/* Only stages this build implements are listed; numbers keep DESIGN.md's table. */
const stage_def stage_table[] = {
    {1, "create_dataset", NULL, NEEDS_TRAINING, "build the recipe's dataset and manifests", stage_create_dataset,
     data_dir_of},
    {2, "train_tokenizer", NULL, NEEDS_TRAINING, "build the token list", stage_train_tokenizer, tokenizer_dir_of},
    {3, "collect_stats", NULL, NEEDS_TRAINING, "feature shapes and global mean/variance sums", stage_collect_stats,
     stats_dir_of},
    {5, "train", NULL, NEEDS_TRAINING, "train the model (CPU; one rank or several: ddp, fsdp)", stage_train, exp_dir_of},
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
