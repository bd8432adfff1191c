/* The recipes' key tables in one list (recipes/keys.h). */
#include "recipes/keys.h"

#include <stddef.h>

#include "recipes/espeak_fortunes/keys.h"
#include "recipes/librispeech_100/keys.h"
#include "recipes/mini_an4/keys.h"

const config_recipe *const *recipes_all(void)
{
    static const config_recipe *const all[] = {&espeak_fortunes_recipe, &mini_an4_recipe, &librispeech_100_recipe, NULL};
    return all;
}
