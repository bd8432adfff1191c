/* espnet3: run the stages of an ESPnet3-style ASR recipe, or a subcommand (cli/commands.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/compute/blas_core.h"
#include "core/config/config.h"
#include "core/base/fsio.h"
#include "core/runner/runner.h"
#include "cli/commands.h"
#include "cli/launch.h"
#include "cli/options.h"
#include "cli/stage_runner.h"
#include "cli/version.h"
#include "stages/stages.h"

/* The training config ESPnet3 loads when none is given (run from a recipe folder). */
#define DEFAULT_TRAINING_CONFIG "conf/training.yaml"

static char *default_template_dir(void);

/* ESPnet3's run.py loads the recipe's conf/training.yaml when --training_config is not given
 * (load_and_merge_config's config_name). So do we, run from a folder that has one, when the stages
 * are not chosen (--stage, --stop_stage, --stages: those name what runs) and that conf/ is not the
 * templates' (the repository root's conf/training.yaml is the template, not a recipe's config). */
static void default_training_config(cli_args *a)
{
    if (a->training_config || a->stage >= 0 || a->stop_stage >= 0 || a->stages ||
        access(DEFAULT_TRAINING_CONFIG, F_OK) != 0)
        return;
    char *tdir = a->template_dir ? xstrdup(a->template_dir) : default_template_dir();
    char *here = realpath("conf", NULL), *tmpl = tdir ? realpath(tdir, NULL) : NULL;
    int is_template = here && tmpl && !strcmp(here, tmpl);
    free(here), free(tmpl), free(tdir);
    if (is_template) return;
    a->training_config = DEFAULT_TRAINING_CONFIG;
    log_info("--training_config not given: %s (ESPnet3's default)", DEFAULT_TRAINING_CONFIG);
}

/* conf/ beside the binary (the repository root), unless --template_dir says otherwise. */
static char *default_template_dir(void)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = '\0';
    char *dir = path_dirname(exe);
    char *conf = path_join(dir, "conf");
    free(dir);
    if (is_dir(conf)) return conf;
    free(conf);
    /* Sanitizer builds live one folder down (build-asan/espnet3). */
    dir = path_dirname(exe);
    char *up = path_dirname(dir);
    conf = path_join(up, "conf");
    free(dir);
    free(up);
    if (is_dir(conf)) return conf;
    free(conf);
    /* None there: name the first place, so loading warns that the template is missing. */
    dir = path_dirname(exe);
    conf = path_join(dir, "conf");
    free(dir);
    return conf;
}

/* A SLURM worker job runs the one stage its driver named, without the stage log and config
 * the driver writes, and computes only its shards (runner_run in worker mode). */
static int run_worker_stage(const char *name, const esp_configs *cfgs, esp_err *err)
{
    const stage_def *s = stage_by_name(name);
    if (!s) return esp_fail(err, "this SLURM job was told to run stage '%s', which this binary does not have", name);
    cli_args named = {.stages = (const char *[]){name, NULL}, .n_stages = 1}; /* as if given by --stages */
    backend_kind kind;
    if (check_stage_configs(&named, &s, &kind, 1, cfgs, err) < 0) return -1;
    char *dir = s->output_dir(cfgs);
    stage_ctx ctx = {.configs = cfgs, .log_dir = dir, .backend = kind};
    log_info("SLURM worker: stage %s", s->name);
    int rc = s->run(&ctx, err);
    if (rc == 0 && !runner_worker_found_job())
        rc = esp_fail(err, "stage %s did not come to this job's work folder %s (did the configs or overrides change "
                      "since the job was submitted? rerun the stage)", s->name, getenv("ESPNET3_RUNNER_WORK_DIR"));
    free(dir);
    return rc;
}

/* The key path of an override: `+trainer.max_epochs=3` -> trainer.max_epochs. */
static char *override_key_path(const char *ov)
{
    if (*ov == '+' || *ov == '~') ov++;
    return xstrndup(ov, strcspn(ov, "="));
}

/* With several configs given, an override goes to the configs that know most of its key path
 * (over their templates): `trainer.max_epochs=3` reaches the training config only,
 * `model.beam_size=5` the inference config (the training config has `model:` but no beam_size),
 * `parallel.n_workers=4` every config that has it. One that none knows goes to all, where
 * validation names the unknown key. per[k] gets config k's overrides. */
static int route_overrides(const char *const paths[CONFIG_KIND_COUNT], const config_load_opts *opts,
                           const char **per[CONFIG_KIND_COUNT], int n_per[CONFIG_KIND_COUNT], esp_err *err)
{
    int given = 0;
    for (int k = 0; k < CONFIG_KIND_COUNT; k++) {
        per[k] = xcalloc((size_t)opts->n_overrides + 1, sizeof *per[k]);
        n_per[k] = 0;
        given += paths[k] != NULL;
    }
    for (int i = 0; i < opts->n_overrides; i++) {
        const char *ov = opts->overrides[i];
        int depth[CONFIG_KIND_COUNT] = {0}, best = 0;
        if (given > 1) {
            char *key = override_key_path(ov);
            for (int k = 0; k < CONFIG_KIND_COUNT; k++) {
                if (!paths[k]) continue;
                if (config_key_depth((config_kind)k, paths[k], opts, key, &depth[k], err) != 0) {
                    free(key);
                    return -1;
                }
                if (depth[k] > best) best = depth[k];
            }
            free(key);
        }
        for (int k = 0; k < CONFIG_KIND_COUNT; k++)
            if (paths[k] && depth[k] == best) per[k][n_per[k]++] = ov;
    }
    return 0;
}

/* ESPnet3's run.py: an inference, metrics, publication or demo config that leaves out exp_tag /
 * exp_dir gets the training config's, and a metrics or publication config without inference_dir
 * the inference config's. They go
 * in as overrides ahead of the command line's (which still win); *ov becomes a new array when
 * anything was added. */
static int inherit_paths(config_kind kind, const char *path, const esp_configs *cfgs, char *added[3],
                         const char ***ov, int *n_ov, esp_err *err)
{
    const training_cfg *tc = training_of(cfgs);
    const inference_cfg *ic = cfgs->inference ? cfgs->inference->typed : NULL;
    const char *keys[3] = {"exp_tag", "exp_dir", "inference_dir"};
    const char *vals[3] = {tc ? tc->exp_tag : NULL, tc ? tc->exp_dir : NULL,
                           (kind == CONFIG_METRICS || kind == CONFIG_PUBLICATION) && ic ? ic->inference_dir : NULL};
    config_load_opts own = {0}; /* the file as written (no template): does it set the key? */
    int n = 0;
    for (int j = 0; j < 3; j++) {
        if (!vals[j]) continue;
        /* inference_dir also counts as set under ESPnet3's older names (config.c maps them) */
        const char *names[3] = {keys[j], j == 2 ? config_older_inference_dir_names[0] : NULL,
                                j == 2 ? config_older_inference_dir_names[1] : NULL};
        int set = 0;
        for (int a = 0; a < 3 && names[a] && !set; a++) {
            int depth = 0;
            if (config_key_depth(kind, path, &own, names[a], &depth, err) != 0) return -1;
            set = depth > 0;
        }
        if (!set) added[n++] = xasprintf("%s=%s", keys[j], vals[j]);
    }
    if (!n) return 0;
    const char **all = xcalloc((size_t)(n + *n_ov + 1), sizeof *all);
    for (int j = 0; j < n; j++) all[j] = added[j];
    for (int j = 0; j < *n_ov; j++) all[n + j] = (*ov)[j];
    *ov = all;
    *n_ov += n;
    return 0;
}

/* --show_config: each loaded config as the stages see it, every left-out key with its default. */
static int show_configs(esp_config **const slots[CONFIG_KIND_COUNT], esp_err *err)
{
    int shown = 0;
    for (int k = 0; k < CONFIG_KIND_COUNT; k++) {
        if (!*slots[k]) continue;
        char *yaml = yt_emit_config((*slots[k])->full, NULL);
        printf("# %s config (%s), with defaults\n%s", config_kind_name((config_kind)k), (*slots[k])->path, yaml);
        free(yaml);
        shown++;
    }
    return shown ? 0 : esp_fail(err, "--show_config: no config given (pass --config FILE, --inference_config FILE, ...)");
}

int main(int argc, char **argv)
{
    cli_args args;
    esp_err err;
    blas_core_select(argv); /* may start this process again, with OpenBLAS' kernels for this CPU */
    stages_register_recipes(); /* before any config is loaded: the recipes' own keys */
    const cli_command *cmd = argc > 1 ? cli_command_find(argv[1]) : NULL;
    if (cmd) return cmd->run(argc - 1, argv + 1);
    runner_set_command(argc, argv);
    if (cli_parse(argc, argv, &args, &err) != 0) {
        fprintf(stderr, "espnet3: error: %s\n", err.msg);
        cli_print_usage(stderr);
        cli_args_free(&args);
        return ESP_EXIT_USAGE;
    }
    if (args.help) {
        cli_print_help(stdout);
        cli_args_free(&args);
        return 0;
    }
    if (args.version) {
        print_version(stdout);
        cli_args_free(&args);
        return 0;
    }
    log_set_quiet(args.quiet);
    default_training_config(&args);

    const stage_def *selected[64];
    backend_kind kinds[64];
    int n_sel = select_stages(&args, selected, &err);
    if (n_sel < 0) {
        fprintf(stderr, "espnet3: error: %s\n", err.msg);
        cli_print_usage(stderr);
        cli_args_free(&args);
        return ESP_EXIT_USAGE;
    }

    char *tdir = args.template_dir ? (*args.template_dir ? xstrdup(args.template_dir) : NULL) : default_template_dir();
    config_load_opts opts = {.template_dir = tdir, .overrides = args.overrides, .n_overrides = args.n_overrides};
    esp_configs cfgs = {0};
    const char *paths[CONFIG_KIND_COUNT] = {args.training_config, args.inference_config, args.metrics_config,
                                            args.publication_config, args.demo_config};
    esp_config **slots[CONFIG_KIND_COUNT] = {&cfgs.training, &cfgs.inference, &cfgs.metrics, &cfgs.publication,
                                             &cfgs.demo};
    const char **per[CONFIG_KIND_COUNT];
    int n_per[CONFIG_KIND_COUNT];
    int rc = route_overrides(paths, &opts, per, n_per, &err);
    char *inherited[CONFIG_KIND_COUNT][3] = {{0}};
    for (int k = 0; k < CONFIG_KIND_COUNT && rc == 0; k++) {
        if (!paths[k]) continue;
        const char **ov = per[k];
        int n_ov = n_per[k];
        if (k > 0) rc = inherit_paths((config_kind)k, paths[k], &cfgs, inherited[k], &ov, &n_ov, &err);
        config_load_opts ko = {.template_dir = tdir, .overrides = ov, .n_overrides = n_ov};
        if (rc == 0) rc = config_load((config_kind)k, paths[k], &ko, slots[k], &err);
        if (ov != per[k]) free(ov);
    }
    for (int k = 0; k < CONFIG_KIND_COUNT; k++) {
        free(per[k]);
        for (int j = 0; j < 3; j++) free(inherited[k][j]);
    }
    if (rc == 0 && !args.show_config) {
        n_sel = check_stage_configs(&args, selected, kinds, n_sel, &cfgs, &err);
        if (n_sel < 0) rc = -1;
    }

    if (rc == 0 && args.show_config) {
        rc = show_configs(slots, &err);
    } else if (rc == 0 && args.dry_run) {
        printf("# stages to run:");
        for (int i = 0; i < n_sel; i++) printf(" %d:%s", selected[i]->number, selected[i]->name);
        printf("\n");
        for (int k = 0; k < CONFIG_KIND_COUNT; k++) {
            if (!*slots[k]) continue;
            char *yaml = yt_emit_config((*slots[k])->tree, NULL);
            printf("# resolved %s config (%s)\n%s", config_kind_name((config_kind)k), (*slots[k])->path, yaml);
            free(yaml);
        }
    } else if (rc == 0 && runner_worker_stage()) {
        rc = run_worker_stage(runner_worker_stage(), &cfgs, &err);
    } else if (rc == 0) {
        for (int i = 0; i < n_sel && rc == 0; i++) {
            int launched = launch_stage_ranks(selected[i], kinds[i], &args, argc, argv, &cfgs, &rc, &err);
            if (launched < 0) rc = -1;
            else if (!launched) rc = run_stage(selected[i], kinds[i], &cfgs, args.write_requirements, &err);
            if (rc == 0 && runner_pending_count() > 0) {
                /* Async mode: later stages need these results, so the run stops here. */
                printf("espnet3: stage %s: submitted to SLURM (jobs %s); rerun the same command when they are "
                       "done to merge the results%s\n",
                       selected[i]->name, runner_pending_jobs(), i + 1 < n_sel ? " and go on with the next stages" : "");
                break;
            }
        }
    }
    if (rc != 0 && rc != STAGE_STOPPED) fprintf(stderr, "espnet3: error: %s\n", err.msg);
    for (int k = 0; k < CONFIG_KIND_COUNT; k++) config_free(*slots[k]);
    free(tdir);
    cli_args_free(&args);
    return rc == 0 ? 0 : rc == STAGE_STOPPED ? ESP_EXIT_STOPPED : ESP_EXIT_FAIL;
}
