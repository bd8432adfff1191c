#include "cli/options.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "core/base/edit_distance.h"
#include "stages/stages.h"

#define FIELD(f) offsetof(cli_args, f)

static const cli_option options[] = {
    {'c', "training_config", "config", OPT_STRING, FIELD(training_config), "FILE", NULL,
     "training config (create_dataset, train_tokenizer, collect_stats, train)"},
    {0, "inference_config", NULL, OPT_STRING, FIELD(inference_config), "FILE", NULL, "inference config (infer, pack_model)"},
    {0, "metrics_config", NULL, OPT_STRING, FIELD(metrics_config), "FILE", NULL, "metrics config (measure)"},
    {0, "publication_config", NULL, OPT_STRING, FIELD(publication_config), "FILE", NULL,
     "publication config (pack_model's Hugging Face folder, upload_model)"},
    {0, "demo_config", NULL, OPT_STRING, FIELD(demo_config), "FILE", NULL, "demo config (pack_demo, upload_demo)"},
    {0, "stage", NULL, OPT_STAGE, FIELD(stage), "N", "first stage", "first stage number to run"},
    {0, "stop_stage", NULL, OPT_STAGE, FIELD(stop_stage), "M", "last stage", "last stage number to run"},
    {0, "stages", NULL, OPT_NAMES, FIELD(stages), "NAME...", "all", "stages to run by name (or all)"},
    {'n', "dry_run", NULL, OPT_FLAG, FIELD(dry_run), NULL, NULL,
     "print the resolved stage list and configs, run nothing"},
    {0, "write_requirements", NULL, OPT_FLAG, FIELD(write_requirements), NULL, NULL,
     "also write requirements.txt beside each stage log (what --version prints: the build and its libraries)"},
    {0, "template_dir", NULL, OPT_STRING, FIELD(template_dir), "DIR", "conf/ beside the binary",
     "template configs merged under the recipe config ('' for none)"},
    {0, "nproc_per_node", NULL, OPT_INT, FIELD(nproc_per_node), "N", NULL,
     "train: start N local ranks of this node (torchrun's manual multi-node launch)"},
    {0, "nnodes", NULL, OPT_INT, FIELD(nnodes), "N", "1", "train: number of nodes, one command per node"},
    {0, "node_rank", NULL, OPT_INT, FIELD(node_rank), "I", "0", "train: this node's index, 0..nnodes-1"},
    {0, "master_addr", NULL, OPT_STRING, FIELD(master_addr), "HOST", "127.0.0.1", "train: host of rank 0 (node 0)"},
    {0, "master_port", NULL, OPT_INT, FIELD(master_port), "PORT", "29500; a free port on one node",
     "train: port of rank 0's rendezvous store"},
    {'q', "quiet", NULL, OPT_FLAG, FIELD(quiet), NULL, NULL, "only warnings and errors on stderr"},
    {'V', "version", NULL, OPT_FLAG, FIELD(version), NULL, NULL, "print version and compiled backends"},
    {'h', "help", NULL, OPT_FLAG, FIELD(help), NULL, NULL, "show this help"},
};
static const cli_table main_table = {options, sizeof options / sizeof *options, "espnet3", "[key.path=value ...]"};

static const cli_option *find_long(const cli_table *t, const char *name, size_t len)
{
    for (size_t i = 0; i < t->n; i++) {
        const cli_option *o = &t->options[i];
        if ((strlen(o->long_name) == len && !strncmp(o->long_name, name, len)) ||
            (o->alias && strlen(o->alias) == len && !strncmp(o->alias, name, len)))
            return o;
    }
    return NULL;
}

static const cli_option *find_short(const cli_table *t, char c)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->options[i].short_name == c) return &t->options[i];
    return NULL;
}

static const char *closest_option(const cli_table *t, const char *name)
{
    const char *best = NULL;
    int best_d = 1 << 30;
    for (size_t i = 0; i < t->n; i++) {
        int d = str_edit_distance(name, t->options[i].long_name);
        if (d < best_d) best_d = d, best = t->options[i].long_name;
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

static int set_value(const cli_option *o, void *out, const char *value, const char *shown, esp_err *err)
{
    void *field = (char *)out + o->offset;
    switch (o->type) {
    case OPT_FLAG:
        *(int *)field = 1;
        return 0;
    case OPT_INT:
    case OPT_STAGE:
        if (parse_long_int(value, (long *)field) != 0 || *(long *)field < 0)
            return esp_fail(err, "%s: expected a %s, got '%s'", shown,
                            o->type == OPT_STAGE ? "stage number" : "non-negative integer", value);
        return 0;
    case OPT_STRING:
        *(const char **)field = value;
        return 0;
    case OPT_NAMES:
        break;
    }
    return 0;
}

int cli_parse_table(const cli_table *t, int argc, char **argv, void *out, const char **pos, int *n_pos, esp_err *err)
{
    *n_pos = 0;
    int rest = 0; /* after "--": every argument is positional */
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const cli_option *o = NULL;
        const char *inline_value = NULL;
        char shown[128];
        if (!rest && !strcmp(arg, "--")) {
            rest = 1;
            continue;
        }
        if (!rest && arg[0] == '-' && arg[1] == '-' && arg[2]) {
            const char *name = arg + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(t, name, len);
            if (!o) {
                char *n = xstrndup(name, len);
                const char *s = closest_option(t, n);
                if (s) esp_fail(err, "unknown option '--%s' (did you mean --%s?)", n, s);
                else esp_fail(err, "unknown option '--%s' (see %s --help)", n, t->prog);
                free(n);
                return -1;
            }
            if (eq) inline_value = eq + 1;
            snprintf(shown, sizeof shown, "--%s", o->long_name);
        } else if (!rest && arg[0] == '-' && arg[1] && arg[1] != '-' && !arg[2]) {
            o = find_short(t, arg[1]);
            if (!o) return esp_fail(err, "unknown option '%s' (see %s --help)", arg, t->prog);
            snprintf(shown, sizeof shown, "-%c", arg[1]);
        } else {
            pos[(*n_pos)++] = arg;
            continue;
        }
        if (o->type == OPT_FLAG) {
            if (inline_value) return esp_fail(err, "%s takes no value", shown);
            set_value(o, out, NULL, shown, err);
            continue;
        }
        if (o->type == OPT_NAMES) {
            const char ***names = (const char ***)((char *)out + o->offset);
            int n = 0;
            if (*names) return esp_fail(err, "%s given twice", shown);
            *names = xcalloc((size_t)argc + 1, sizeof **names);
            if (inline_value && *inline_value) (*names)[n++] = inline_value;
            while (i + 1 < argc && argv[i + 1][0] != '-' && !strchr(argv[i + 1], '=')) (*names)[n++] = argv[++i];
            if (!n) return esp_fail(err, "%s needs at least one %.*s (see %s --help)", shown,
                                    (int)strcspn(o->arg_name, "."), o->arg_name, t->prog);
            continue;
        }
        const char *value = inline_value;
        if (!value) {
            if (i + 1 >= argc) return esp_fail(err, "%s needs a value (%s)", shown, o->arg_name);
            value = argv[++i];
        }
        if (set_value(o, out, value, shown, err) != 0) return -1;
    }
    return 0;
}

int cli_parse(int argc, char **argv, cli_args *a, esp_err *err)
{
    memset(a, 0, sizeof *a);
    a->stage = a->stop_stage = -1;
    a->nproc_per_node = a->nnodes = a->node_rank = a->master_port = -1;
    a->overrides = xcalloc((size_t)argc + 1, sizeof *a->overrides);
    const char **pos = xcalloc((size_t)argc + 1, sizeof *pos);
    int n_pos, rc = cli_parse_table(&main_table, argc, argv, a, pos, &n_pos, err);
    /* What is not an option is an override: key.path=value, +key=value, ~key. */
    for (int i = 0; i < n_pos && rc == 0; i++) {
        const char *arg = pos[i];
        if ((strchr(arg, '=') && arg[0] != '-') || arg[0] == '~' || arg[0] == '+') a->overrides[a->n_overrides++] = arg;
        else rc = esp_fail(err, "unexpected argument '%s' (overrides look like key.path=value)", arg);
    }
    free(pos);
    if (rc != 0) return -1;
    while (a->stages && a->stages[a->n_stages]) a->n_stages++;
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
            o = find_long(&main_table, arg + 2, eq ? (size_t)(eq - arg - 2) : strlen(arg + 2));
            inline_value = eq != NULL;
        } else if (arg[0] == '-' && arg[1] && arg[1] != '-' && !arg[2]) {
            o = find_short(&main_table, arg[1]);
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

void cli_table_usage(const cli_table *t, void *fpv)
{
    FILE *fp = fpv;
    fprintf(fp, "usage: %s", t->prog);
    for (size_t i = 0; i < t->n; i++) {
        const cli_option *o = &t->options[i];
        if (o->arg_name) fprintf(fp, " [--%s %s]", o->long_name, o->arg_name);
        else fprintf(fp, " [--%s]", o->long_name);
    }
    fprintf(fp, " %s\n", t->operands);
}

void cli_table_options(const cli_table *t, void *fpv)
{
    FILE *fp = fpv;
    for (size_t i = 0; i < t->n; i++) {
        char label[128];
        option_label(&t->options[i], label, sizeof label);
        fprintf(fp, "  %-40s %s", label, t->options[i].help);
        if (t->options[i].default_text) fprintf(fp, " (default: %s)", t->options[i].default_text);
        fprintf(fp, "\n");
    }
}

void cli_print_usage(void *fp) { cli_table_usage(&main_table, fp); }

void cli_print_help(void *fpv)
{
    FILE *fp = fpv;
    cli_print_usage(fp);
    fprintf(fp, "\nRuns the stages of an ESPnet3-style ASR recipe from YAML configs.\n\nOptions:\n");
    cli_table_options(&main_table, fp);
    fprintf(fp, "\nStages (--stage N --stop_stage M, or --stages NAME... | all):\n");
    for (int i = 0; i < stage_count; i++) {
        const stage_def *s = &stage_table[i];
        char name[64];
        if (s->alias) snprintf(name, sizeof name, "%s (%s)", s->name, s->alias);
        else snprintf(name, sizeof name, "%s", s->name);
        fprintf(fp, "  %d  %-24s %s [%s]\n", s->number, name, s->summary, stage_config_option(s));
    }
    fprintf(fp, "\nCommands (espnet3 <command> --help):\n");
    for (const cli_command *c = cli_command_list(); c->name; c++) fprintf(fp, "  %-28s %s\n", c->name, c->summary);
    fprintf(fp, "\nOverrides: key.path=value sets a config value after composition (e.g. trainer.max_epochs=5),\n"
                "+key=value adds one, ~key deletes one. Values are YAML: 3, 0.5, true, [a, b], 'text'.\n"
                "With several configs, an override goes to those that know most of its key path.\n");
}
