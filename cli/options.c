#include "cli/options.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/edit_distance.h"
#include "stages/stages.h"

typedef enum opt_type { OPT_FLAG, OPT_INT, OPT_PATH, OPT_NAMES } opt_type;

typedef struct cli_option {
    char short_name;         /* 0: none */
    const char *long_name;
    const char *alias;       /* another long name, NULL if none */
    opt_type type;
    size_t offset;           /* field in cli_args */
    const char *arg_name;
    const char *default_text;
    const char *help;
} cli_option;

#define FIELD(f) offsetof(cli_args, f)

static const cli_option options[] = {
    {'c', "training_config", "config", OPT_PATH, FIELD(training_config), "FILE", NULL,
     "training config (create_dataset, train_tokenizer, collect_stats, train)"},
    {0, "inference_config", NULL, OPT_PATH, FIELD(inference_config), "FILE", NULL, "inference config (infer, pack_model)"},
    {0, "metrics_config", NULL, OPT_PATH, FIELD(metrics_config), "FILE", NULL, "metrics config (measure)"},
    {0, "publication_config", NULL, OPT_PATH, FIELD(publication_config), "FILE", NULL,
     "publication config (pack_model's Hugging Face folder, upload_model)"},
    {0, "demo_config", NULL, OPT_PATH, FIELD(demo_config), "FILE", NULL, "demo config (pack_demo, upload_demo)"},
    {0, "stage", NULL, OPT_INT, FIELD(stage), "N", "first stage", "first stage number to run"},
    {0, "stop_stage", NULL, OPT_INT, FIELD(stop_stage), "M", "last stage", "last stage number to run"},
    {0, "stages", NULL, OPT_NAMES, FIELD(stages), "NAME...", "all", "stages to run by name (or all)"},
    {'n', "dry_run", NULL, OPT_FLAG, FIELD(dry_run), NULL, NULL,
     "print the resolved stage list and configs, run nothing"},
    {0, "show_config", NULL, OPT_FLAG, FIELD(show_config), NULL, NULL,
     "print each given config merged and resolved with every default filled in (Hydra's --cfg job), run nothing"},
    {0, "write_requirements", NULL, OPT_FLAG, FIELD(write_requirements), NULL, NULL,
     "also write requirements.txt beside each stage log (what --version prints: the build and its libraries)"},
    {0, "template_dir", NULL, OPT_PATH, FIELD(template_dir), "DIR", "conf/ beside the binary",
     "template configs merged under the recipe config ('' for none)"},
    {0, "nproc_per_node", NULL, OPT_INT, FIELD(nproc_per_node), "N", NULL,
     "train: start N local ranks of this node (torchrun's manual multi-node launch)"},
    {0, "nnodes", NULL, OPT_INT, FIELD(nnodes), "N", "1", "train: number of nodes, one command per node"},
    {0, "node_rank", NULL, OPT_INT, FIELD(node_rank), "I", "0", "train: this node's index, 0..nnodes-1"},
    {0, "master_addr", NULL, OPT_PATH, FIELD(master_addr), "HOST", "127.0.0.1", "train: host of rank 0 (node 0)"},
    {0, "master_port", NULL, OPT_INT, FIELD(master_port), "PORT", "29500; a free port on one node",
     "train: port of rank 0's rendezvous store"},
    {'q', "quiet", NULL, OPT_FLAG, FIELD(quiet), NULL, NULL, "only warnings and errors on stderr"},
    {'V', "version", NULL, OPT_FLAG, FIELD(version), NULL, NULL, "print version and compiled backends"},
    {'h', "help", NULL, OPT_FLAG, FIELD(help), NULL, NULL, "show this help"},
};
#define N_OPTIONS (sizeof options / sizeof *options)

static const cli_option *find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const cli_option *o = &options[i];
        if ((strlen(o->long_name) == len && !strncmp(o->long_name, name, len)) ||
            (o->alias && strlen(o->alias) == len && !strncmp(o->alias, name, len)))
            return o;
    }
    return NULL;
}

static const cli_option *find_short(char c)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (options[i].short_name == c) return &options[i];
    return NULL;
}

static const char *closest_option(const char *name)
{
    const char *best = NULL;
    int best_d = 1 << 30;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        int d = str_edit_distance(name, options[i].long_name);
        if (d < best_d) best_d = d, best = options[i].long_name;
    }
    return best_d <= 3 ? best : NULL;
}

static int parse_long_int(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno) return -1;
    *out = v;
    return 0;
}

static int set_value(const cli_option *o, cli_args *a, const char *value, const char *shown, esp_err *err)
{
    void *field = (char *)a + o->offset;
    switch (o->type) {
    case OPT_FLAG:
        *(int *)field = 1;
        return 0;
    case OPT_INT:
        if (parse_long_int(value, (long *)field) != 0 || *(long *)field < 0)
            return esp_fail(err, "%s: expected a %s, got '%s'", shown,
                            o->offset == FIELD(stage) || o->offset == FIELD(stop_stage) ? "stage number"
                                                                                        : "non-negative integer",
                            value);
        return 0;
    case OPT_PATH:
        *(const char **)field = value;
        return 0;
    case OPT_NAMES:
        break;
    }
    return 0;
}

int cli_parse(int argc, char **argv, cli_args *a, esp_err *err)
{
    memset(a, 0, sizeof *a);
    a->stage = a->stop_stage = -1;
    a->nproc_per_node = a->nnodes = a->node_rank = a->master_port = -1;
    a->overrides = xcalloc((size_t)argc + 1, sizeof *a->overrides);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const cli_option *o = NULL;
        const char *inline_value = NULL;
        char shown[128];
        if (arg[0] == '-' && arg[1] == '-' && arg[2]) {
            const char *name = arg + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(name, len);
            if (!o) {
                char *n = xstrndup(name, len);
                const char *s = closest_option(n);
                if (s) esp_fail(err, "unknown option '--%s' (did you mean --%s?)", n, s);
                else esp_fail(err, "unknown option '--%s' (see espnet3 --help)", n);
                free(n);
                return -1;
            }
            if (eq) inline_value = eq + 1;
            snprintf(shown, sizeof shown, "--%s", o->long_name);
        } else if (arg[0] == '-' && arg[1] && arg[1] != '-' && !arg[2]) {
            o = find_short(arg[1]);
            if (!o) return esp_fail(err, "unknown option '%s' (see espnet3 --help)", arg);
            snprintf(shown, sizeof shown, "-%c", arg[1]);
        } else if (strchr(arg, '=') && arg[0] != '-') {
            a->overrides[a->n_overrides++] = arg;
            continue;
        } else if (arg[0] == '~' || arg[0] == '+') {
            a->overrides[a->n_overrides++] = arg;
            continue;
        } else {
            return esp_fail(err, "unexpected argument '%s' (overrides look like key.path=value)", arg);
        }
        if (o->type == OPT_FLAG) {
            if (inline_value) return esp_fail(err, "%s takes no value", shown);
            set_value(o, a, NULL, shown, err);
            continue;
        }
        if (o->type == OPT_NAMES) {
            if (a->stages) return esp_fail(err, "%s given twice", shown);
            a->stages = xcalloc((size_t)argc + 1, sizeof *a->stages);
            if (inline_value && *inline_value) a->stages[a->n_stages++] = inline_value;
            while (i + 1 < argc && argv[i + 1][0] != '-' && !strchr(argv[i + 1], '='))
                a->stages[a->n_stages++] = argv[++i];
            if (!a->n_stages) return esp_fail(err, "%s needs at least one stage name (or all)", shown);
            continue;
        }
        const char *value = inline_value;
        if (!value) {
            if (i + 1 >= argc) return esp_fail(err, "%s needs a value (%s)", shown, o->arg_name);
            value = argv[++i];
        }
        if (set_value(o, a, value, shown, err) != 0) return -1;
    }
    if (a->stages && (a->stage >= 0 || a->stop_stage >= 0))
        return esp_fail(err, "--stages cannot be combined with --stage/--stop_stage (use one form)");
    return 0;
}

char **cli_rank_argv(int argc, char **argv, const char *stage)
{
    char **out = xcalloc((size_t)argc + 3, sizeof *out);
    int n = 0;
    out[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const cli_option *o = NULL;
        int inline_value = 0;
        if (arg[0] == '-' && arg[1] == '-' && arg[2]) {
            const char *eq = strchr(arg + 2, '=');
            o = find_long(arg + 2, eq ? (size_t)(eq - arg - 2) : strlen(arg + 2));
            inline_value = eq != NULL;
        } else if (arg[0] == '-' && arg[1] && arg[1] != '-' && !arg[2]) {
            o = find_short(arg[1]);
        }
        size_t f = o ? o->offset : (size_t)-1;
        int drop = f == FIELD(stage) || f == FIELD(stop_stage) || f == FIELD(stages) || f == FIELD(nproc_per_node) ||
                   f == FIELD(nnodes) || f == FIELD(node_rank) || f == FIELD(master_addr) || f == FIELD(master_port);
        int takes = o && o->type != OPT_FLAG && !inline_value;
        if (!drop) {
            out[n++] = argv[i];
            if (takes && o->type != OPT_NAMES && i + 1 < argc) out[n++] = argv[++i];
            continue;
        }
        if (o->type == OPT_NAMES) {
            while (i + 1 < argc && argv[i + 1][0] != '-' && !strchr(argv[i + 1], '=')) i++;
        } else if (takes) {
            i++;
        }
    }
    out[n++] = "--stages";
    out[n++] = (char *)stage;
    return out;
}

void cli_args_free(cli_args *a)
{
    free(a->overrides);
    free(a->stages);
    memset(a, 0, sizeof *a);
}

static void option_label(const cli_option *o, char *buf, size_t n)
{
    size_t used = 0;
    if (o->short_name) used += (size_t)snprintf(buf + used, n - used, "-%c, ", o->short_name);
    else used += (size_t)snprintf(buf + used, n - used, "    ");
    used += (size_t)snprintf(buf + used, n - used, "--%s", o->long_name);
    if (o->alias) used += (size_t)snprintf(buf + used, n - used, ", --%s", o->alias);
    if (o->arg_name) snprintf(buf + used, n - used, " %s", o->arg_name);
}

void cli_print_usage(void *fpv)
{
    FILE *fp = fpv;
    fprintf(fp, "usage: espnet3");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const cli_option *o = &options[i];
        if (o->arg_name) fprintf(fp, " [--%s %s]", o->long_name, o->arg_name);
        else fprintf(fp, " [--%s]", o->long_name);
    }
    fprintf(fp, " [key.path=value ...]\n");
}

void cli_print_help(void *fpv)
{
    FILE *fp = fpv;
    cli_print_usage(fp);
    fprintf(fp, "\nRuns the stages of an ESPnet3-style ASR recipe from YAML configs.\n\nOptions:\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        char label[128];
        option_label(&options[i], label, sizeof label);
        fprintf(fp, "  %-40s %s", label, options[i].help);
        if (options[i].default_text) fprintf(fp, " (default: %s)", options[i].default_text);
        fprintf(fp, "\n");
    }
    fprintf(fp, "\nStages (--stage N --stop_stage M, or --stages NAME... | all):\n");
    for (int i = 0; i < stage_count; i++) {
        const stage_def *s = &stage_table[i];
        char name[64];
        if (s->alias) snprintf(name, sizeof name, "%s (%s)", s->name, s->alias);
        else snprintf(name, sizeof name, "%s", s->name);
        fprintf(fp, "  %d  %-24s %s [%s]\n", s->number, name, s->summary, stage_config_option(s));
    }
    fprintf(fp, "\nOverrides: key.path=value sets a config value after composition (e.g. trainer.max_epochs=5),\n"
                "+key=value adds one, ~key deletes one. Values are YAML: 3, 0.5, true, [a, b], 'text'.\n"
                "With several configs, an override goes to those that know most of its key path.\n");
}
