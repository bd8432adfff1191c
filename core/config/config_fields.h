/* The shorthand of the libcyaml schemas: core/config/config_schema.c's and the recipes' own key
 * tables (core/config/config_recipe.h). Every key is optional; a left-out one is 0 / NULL, or its
 * declared default. */
#ifndef ESPNET3_CONFIG_FIELDS_H
#define ESPNET3_CONFIG_FIELDS_H

#include <cyaml/cyaml.h>

#define OPT (CYAML_FLAG_OPTIONAL)
#define OPT_PTR (CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER)
#define STR(key, type, member) CYAML_FIELD_STRING_PTR(key, OPT_PTR, type, member, 0, CYAML_UNLIMITED)
/* A string whose null is a value (ESPnet's None, kept in the tree: config_validate.c's null_meaning)
 * that reads as NULL. */
#define STR_OR_NONE(key, type, member) \
    CYAML_FIELD_STRING_PTR(key, CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER_NULL_STR, type, member, 0, CYAML_UNLIMITED)
#define INT(key, type, member) CYAML_FIELD_INT(key, OPT, type, member)
#define FLT(key, type, member) CYAML_FIELD_FLOAT(key, OPT, type, member)
#define BOOL(key, type, member) CYAML_FIELD_BOOL(key, OPT, type, member)
#define MAP(key, type, member, fields) CYAML_FIELD_MAPPING_PTR(key, OPT_PTR, type, member, fields)
#define SEQ(key, type, member, entry) \
    CYAML_FIELD_SEQUENCE_COUNT(key, OPT_PTR, type, member, n_##member, entry, 0, CYAML_UNLIMITED)
#define PAIR(key, type, member, entry) CYAML_FIELD_SEQUENCE_COUNT(key, OPT_PTR, type, member, n_##member, entry, 2, 2)
#define IGNORED(key) CYAML_FIELD_IGNORE(key, OPT)

/* List entries: a string, an int64_t. */
extern const cyaml_schema_value_t config_string_entry;
extern const cyaml_schema_value_t config_int_entry;

#endif
