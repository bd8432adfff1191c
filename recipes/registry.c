#include "recipes/registry.h"

#include <stdlib.h>
#include <string.h>

static const dataset_builder builders[] = {
    {"espnet3.recipes.espeak_fortunes.create_dataset", "espeak_fortunes", espeak_fortunes_create_dataset},
    {"espnet3.recipes.mini_an4.create_dataset", "mini_an4", mini_an4_create_dataset},
    {"espnet3.recipes.librispeech_100.create_dataset", "librispeech_100", librispeech_100_create_dataset},
};

static const size_t builder_count = sizeof builders / sizeof builders[0];

const dataset_builder *dataset_builder_find(const char *name)
{
    for (size_t i = 0; i < builder_count; i++)
        if (strcmp(name, builders[i].name) == 0 || strcmp(name, builders[i].short_name) == 0)
            return &builders[i];
    return NULL;
}

char *dataset_builder_names(void)
{
    char *out = xstrdup("");
    for (size_t i = 0; i < builder_count; i++) {
        char *next = xasprintf("%s%s%s (alias %s)", out, i ? ", " : "", builders[i].name,
                               builders[i].short_name);
        free(out);
        out = next;
    }
    return out;
}

static const text_builder text_builders[] = {
    {"src.tokenizer.gather_training_text", recipes_gather_training_text},
};

const text_builder *text_builder_find(const char *name)
{
    for (size_t i = 0; i < sizeof text_builders / sizeof *text_builders; i++)
        if (!strcmp(name, text_builders[i].name)) return &text_builders[i];
    return NULL;
}

int recipes_output_fn_is_builtin(const char *func)
{
    static const char *const names[] = {"src.inference.output_fn", "src.inference.build_output"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(func, names[i])) return 1;
    return 0;
}
