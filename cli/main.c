/* espnet3: run the stages of an ESPnet3-style ASR recipe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/config.h"
#include "../core/fsio.h"
#include "launch.h"
#include "options.h"
#include "stage_runner.h"
#include "version.h"

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
    return NULL;
}

int main(int argc, char **argv)
{
    cli_args args;
    esp_err err;
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

    const stage_def *selected[64];
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
    const char *paths[CONFIG_KIND_COUNT] = {args.training_config, args.inference_config, args.metrics_config};
    esp_config **slots[CONFIG_KIND_COUNT] = {&cfgs.training, &cfgs.inference, &cfgs.metrics};
    int rc = 0;
    for (int k = 0; k < CONFIG_KIND_COUNT && rc == 0; k++)
        if (paths[k]) rc = config_load((config_kind)k, paths[k], &opts, slots[k], &err);
    if (rc == 0) rc = check_stage_configs(selected, n_sel, &cfgs, &err);

    if (rc == 0 && args.dry_run) {
        printf("# stages to run:");
        for (int i = 0; i < n_sel; i++) printf(" %d:%s", selected[i]->number, selected[i]->name);
        printf("\n");
        for (int k = 0; k < CONFIG_KIND_COUNT; k++) {
            if (!*slots[k]) continue;
            char *yaml = yt_emit_config((*slots[k])->tree, NULL);
            printf("# resolved %s config (%s)\n%s", config_kind_name((config_kind)k), (*slots[k])->path, yaml);
            free(yaml);
        }
    } else if (rc == 0) {
        for (int i = 0; i < n_sel && rc == 0; i++) {
            int launched = launch_stage_ranks(selected[i], &args, argc, argv, &cfgs, &rc, &err);
            if (launched < 0) rc = -1;
            else if (!launched) rc = run_stage(selected[i], &cfgs, &err);
        }
    }
    if (rc != 0) fprintf(stderr, "espnet3: error: %s\n", err.msg);
    for (int k = 0; k < CONFIG_KIND_COUNT; k++) config_free(*slots[k]);
    free(tdir);
    cli_args_free(&args);
    return rc == 0 ? 0 : ESP_EXIT_FAIL;
}
