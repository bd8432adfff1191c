/* The recipes' table: each recipe's names and keys with its dataset builder, and the text
 * builders and output functions of ESPnet3's recipes that ours carry in C (recipes/registry.h). */
#include "recipes/registry.h"

#include <stdlib.h>
#include <string.h>

#include "recipes/espeak_fortunes/keys.h"
#include "recipes/librispeech_100/keys.h"
#include "recipes/mini_an4/keys.h"

static const dataset_builder builders[] = {
    {&espeak_fortunes_recipe, espeak_fortunes_create_dataset},
    {&mini_an4_recipe, mini_an4_create_dataset},
    {&librispeech_100_recipe, librispeech_100_create_dataset},
};

static const size_t builder_count = sizeof builders / sizeof builders[0];

const dataset_builder *dataset_builder_of(const config_recipe *r)
{
    for (size_t i = 0; i < builder_count; i++)
        if (builders[i].recipe == r) return &builders[i];
    return NULL;
}

const dataset_builder *dataset_builder_find(const char *name)
{
    for (size_t i = 0; i < builder_count; i++)
        if (strcmp(name, builders[i].recipe->name) == 0 || strcmp(name, builders[i].recipe->short_name) == 0)
            return &builders[i];
    return NULL;
}

char *dataset_builder_names(void)
{
    char *out = xstrdup("");
    for (size_t i = 0; i < builder_count; i++) {
        char *next = xasprintf("%s%s%s (alias %s)", out, i ? ", " : "", builders[i].recipe->name,
                               builders[i].recipe->short_name);
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
