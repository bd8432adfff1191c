/* Values checked when a config is loaded (core/config/config_values.c): ranges, 0 written where
 * 0 means nothing, rules between keys and Lightning's max_epochs. Bad values are one error line
 * "<file>:<line>:<col>: <key>: ..." and exit status 1 from the binary, before any stage runs. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config/config.h"
#include "core/config/config_values.h"
#include "core/base/fsio.h"
#include "test/unit/config/config_test_util.h"
#include "core/nn/model_params.h"
#include "test/unit/test_util.h"

static char tmp[256];

static void setup(void)
{
    test_tmpdir_make(tmp, sizeof tmp, "config_values");
    log_set_quiet(1);
}

static void teardown(void) { test_tmpdir_remove(tmp); }

TestSuite(config_values, .init = setup, .fini = teardown);

static const char *tpath(const char *rel) { return test_path(tmp, rel); }

#define assert_has(msg, ...)                                                                      \
    do {                                                                                          \
        char piece_[1024];                                                                        \
        snprintf(piece_, sizeof piece_, __VA_ARGS__);                                             \
        cr_assert(strstr((msg), piece_) != NULL, "message:\n  %s\nlacks:\n  %s", (msg), piece_); \
    } while (0)

typedef struct bad_case {
    const char *yaml;   /* the recipe config, merged over conf/<kind>.yaml */
    const char *expect; /* after "<file>:" in the error line */
} bad_case;

/* Runs the binary on each case; each must exit 1 with exactly one line on stderr:
 * "espnet3: error: <file>:<expect>". */
static void expect_errors(const char *option, const bad_case *cases, size_t n)
{
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/conf", test_root_dir());
    for (size_t i = 0; i < n; i++) {
        const char *path = tpath("bad.yaml");
        test_write_text(path, cases[i].yaml);
        const bin_run *r = CFG_RUN(tmp, option, path, "--template_dir", tdir, "--dry_run", "--quiet");
        cr_assert_eq(r->status, 1, "case %zu (%s): exit %d, stderr:\n%s", i, cases[i].expect, r->status, r->err);
        cr_assert_eq(cfg_count_lines(r->err), 1, "case %zu: stderr:\n%s", i, r->err);
        assert_has(r->err, "espnet3: error: %s:%s", path, cases[i].expect);
    }
}

/* ---- ranges ------------------------------------------------------------------------------- */

Test(config_values, training_ranges_and_zero_are_errors_with_position)
{
    static const bad_case cases[] = {
        {"trainer:\n  devices: 0\n", "2:12: trainer.devices: must be >= 1, got 0 (devices per node"},
        {"trainer:\n  devices: -1\n", "2:12: trainer.devices: must be >= 1, got -1 ("},
        {"trainer:\n  accumulate_grad_batches: 0\n", "2:28: trainer.accumulate_grad_batches: must be >= 1, got 0"},
        {"trainer:\n  gradient_clip_val: -1\n", "2:22: trainer.gradient_clip_val: must be >= 0, got -1 (0 or null: no clipping)"},
        {"trainer:\n  max_epochs: 0\n", "2:15: trainer.max_epochs: must be -1 (no limit) or >= 1, got 0"},
        {"trainer:\n  max_epochs: -2\n", "2:15: trainer.max_epochs: must be -1 (no limit) or >= 1, got -2"},
        {"trainer:\n  max_steps: 0\n", "2:14: trainer.max_steps: must be -1 (no limit) or >= 1, got 0"},
        {"trainer:\n  num_nodes: 0\n", "2:14: trainer.num_nodes: must be >= 1"},
        {"trainer:\n  log_every_n_steps: 0\n", "2:22: trainer.log_every_n_steps: must be >= 1"},
        {"trainer:\n  check_val_every_n_epoch: 0\n", "2:28: trainer.check_val_every_n_epoch: must be >= 1"},
        {"trainer:\n  limit_train_batches: 0\n", "2:24: trainer.limit_train_batches: must be a fraction in (0, 1]"},
        {"trainer:\n  val_check_interval: 0\n", "2:23: trainer.val_check_interval: must be a fraction of an epoch in "
                                               "(0, 1] or a number of batches >= 1, got 0"},
        {"trainer:\n  val_check_interval: 2.5\n", "2:23: trainer.val_check_interval: must be a fraction of an epoch"},
        {"trainer:\n  check_val_every_n_epoch: 1.5\n", "2:28: trainer.check_val_every_n_epoch: expected an integer or "
                                                     "null, got"},
        {"trainer:\n  limit_train_batches: abc\n", "2:24: trainer.limit_train_batches: expected a number, got a string"},
        {"trainer:\n  limit_val_batches: 0\n", "2:22: trainer.limit_val_batches: must be a fraction in (0, 1] or a "
                                              "number of batches >= 1, got 0"},
        {"trainer:\n  limit_val_batches: 2.5\n", "2:22: trainer.limit_val_batches: must be a fraction in (0, 1]"},
        {"trainer:\n  dist_timeout: 0\n", "2:17: trainer.dist_timeout: must be > 0 seconds, got 0"},
        {"num_device: 0\n", "1:13: num_device: must be >= 1, got 0"},
        {"seed: -1\n", "1:7: seed: must be in [0, 4294967295], got -1"},
        {"parallel:\n  n_workers: 0\n", "2:14: parallel.n_workers: must be in [1, 4096], got 0 (worker processes or SLURM jobs; env "
         "local_gpu: one per GPU when left out; leave it out for 1)"},
        {"parallel:\n  n_workers: 100000\n", "2:14: parallel.n_workers: must be in [1, 4096], got 100000"},
        {"model:\n  frontend_conf:\n    n_fft: 0\n", "3:12: model.frontend_conf.n_fft: must be even and in [2, 65536], got 0"},
        {"model:\n  frontend_conf:\n    n_fft: 511\n", "3:12: model.frontend_conf.n_fft: must be even"},
        {"model:\n  frontend_conf:\n    hop_length: 0\n", "3:17: model.frontend_conf.hop_length: must be >= 1"},
        {"model:\n  frontend_conf:\n    fmax: 0\n", "3:11: model.frontend_conf.fmax: must be > 0 Hz, got 0 (leave it out or null"},
        {"model:\n  encoder_conf:\n    num_blocks: 0\n", "3:17: model.encoder_conf.num_blocks: must be in [1, 1024], got 0"},
        {"trainer:\n  max_epochs: -1\n",
         "2:15: trainer.max_epochs: -1 (no epoch limit) without trainer.max_steps would train forever"},
        /* issue 44: sizes that would allocate without end are refused at their line */
        {"model:\n  encoder_conf:\n    num_blocks: 1000000000\n",
         "3:17: model.encoder_conf.num_blocks: must be in [1, 1024], got 1000000000"},
        {"model:\n  encoder_conf:\n    output_size: 1048576\n",
         "3:18: model.encoder_conf.output_size: must be in [1, 65536], got 1048576"},
        {"model:\n  encoder_conf:\n    dropout_rate: 1.0\n", "3:19: model.encoder_conf.dropout_rate: must be in [0, 1)"},
        {"model:\n  specaug_conf:\n    num_time_mask: 0\n",
         "3:20: model.specaug_conf.num_time_mask: must be in [1, 1000], got 0 (apply_time_mask: false turns time masks off"},
        {"optimizer:\n  lr: 0\n", "2:7: optimizer.lr: must be > 0, got 0"},
        {"optimizer:\n  eps: 0\n", "2:8: optimizer.eps: must be > 0"},
        {"optimizer:\n  betas: [0.9, 1.5]\n", "2:16: optimizer.betas[1]: must be in [0, 1), got 1.5"},
        {"scheduler:\n  warmup_steps: 0\n", "2:17: scheduler.warmup_steps: must be >= 1"},
        {"best_model_criterion:\n  - [valid/loss, 0, min]\n", "2:18: best_model_criterion[0].nbest: must be >= 1, got 0"},
        {"create_dataset:\n  func: espeak_fortunes\n  num_test: 0\n", "3:13: create_dataset.num_test: must be >= 1, got 0"},
        {"create_dataset:\n  func: espeak_fortunes\n  nj: 0\n", "3:7: create_dataset.nj: must be in [1, 1024], got 0"},
    };
    expect_errors("--config", cases, sizeof cases / sizeof *cases);
}

Test(config_values, dataloader_batch_rules)
{
    static const bad_case cases[] = {
        /* A negative batch_size is an error whatever the type (the default type, numel, ignores it). */
        {"dataloader:\n  train:\n    iter_factory:\n      batches:\n        batch_size: -1\n",
         "5:21: dataloader.train.iter_factory.batches.batch_size: must be >= 1, got -1"},
        {"dataloader:\n  train:\n    iter_factory:\n      batches:\n        batch_size: 0\n",
         "5:21: dataloader.train.iter_factory.batches.batch_size: must be >= 1, got 0"},
        {"dataloader:\n  train:\n    iter_factory:\n      batches:\n        batch_bins: 0\n",
         "5:21: dataloader.train.iter_factory.batches.batch_bins: must be >= 1, got 0"},
        {"dataloader:\n  train:\n    iter_factory:\n      batches:\n        type: sorted\n        batch_size: null\n",
         "5:15: dataloader.train.iter_factory.batches.type: sorted batches need batch_size (utterances per batch"},
        {"dataloader:\n  train:\n    iter_factory:\n      batches:\n        type: numel\n        batch_bins: ~\n",
         "5:15: dataloader.train.iter_factory.batches.type: numel batches need batch_bins (feature values per batch"},
        {"dataloader:\n  train:\n    iter_factory:\n      batches:\n        shape_files: []\n",
         "5:22: dataloader.train.iter_factory.batches.shape_files: the list is empty (list the shape files that stage 3 "
         "writes, e.g. ${stats_dir}/train/feats_shape)"},
        {"dataloader:\n  train:\n    iter_factory:\n      batches:\n        type: folded\n",
         "5:15: dataloader.train.iter_factory.batches.type: 'folded' is not supported (supported: numel, length, sorted, "
         "unsorted)"},
        {"dataloader:\n  train:\n    total_shards: 0\n", "3:19: dataloader.train.total_shards: must be >= 1, got 0"},
    };
    expect_errors("--config", cases, sizeof cases / sizeof *cases);

    /* Without a type (nor the template's numel), numel's rule applies. */
    const char *path = tpath("notype.yaml");
    test_write_text(path, "dataloader:\n  train:\n    iter_factory:\n      batches:\n        batch_size: 8\n"
                          "        shape_files: [x]\n");
    esp_config *cfg;
    esp_err err;
    cr_assert_neq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:5:9: dataloader.train.iter_factory.batches: numel batches (the default type) need batch_bins",
               path);
}

Test(config_values, rules_between_keys)
{
    static const bad_case cases[] = {
        {"model:\n  frontend_conf:\n    n_fft: 256\n    win_length: 400\n",
         "4:17: model.frontend_conf.win_length: 400 is above n_fft = 256"},
        {"model:\n  frontend_conf:\n    fs: 8000\n    fmax: 6000\n",
         "4:11: model.frontend_conf.fmax: 6000 is not in (fmin = 0, fs/2 = 4000]"},
        {"model:\n  frontend_conf:\n    n_mels: 4\n", "3:13: model.frontend_conf.n_mels: is below 7"},
        {"model:\n  encoder_conf:\n    output_size: 100\n    attention_heads: 3\n",
         "3:18: model.encoder_conf.output_size: 100 is not a multiple of attention_heads = 3"},
        /* sizes each in range that together give 3.4 T parameters: refused before stage 1 */
        {"model:\n  encoder_conf:\n    output_size: 65536\n    linear_units: 262144\n    num_blocks: 64\n",
         "2:3: model: 3418849542146 parameters (13675.4 GB of float32 before gradients and optimizer moments)"},
        {"model:\n  specaug_conf:\n    freq_mask_width_range: [5, 5]\n",
         "3:28: model.specaug_conf.freq_mask_width_range: [5, 5] is not a range [lo, hi) with lo < hi"},
        {"create_dataset:\n  func: espeak_fortunes\n  min_words: 9\n  max_words: 3\n", "3:14: create_dataset.min_words: 9 is above max_words = 3"},
        {"create_dataset:\n  func: espeak_fortunes\n  pitch_range: [70, 30]\n", "3:16: create_dataset.pitch_range: low 70 is above high 30"},
    };
    expect_errors("--config", cases, sizeof cases / sizeof *cases);
}

/* The schedulers' arguments (core/train/scheduler*.c through stage 5's check, the ranges of
 * config_values.c): each error one line at the key it names, or at the scheduler block when the
 * key is not written (a missing one). */
#define SCHED(cls) "scheduler:\n  _target_: " cls "\n"
#define PLATEAU SCHED("torch.optim.lr_scheduler.ReduceLROnPlateau")
Test(config_values, scheduler_errors_at_their_line)
{
    static const bad_case cases[] = {
        {SCHED("torch.optim.lr_scheduler.OneCycleLR") "  total_steps: 100\n",
         "2:3: scheduler.max_lr: missing (OneCycleLR's peak lr, > 0)"},
        {SCHED("torch.optim.lr_scheduler.OneCycleLR") "  max_lr: 0.01\n",
         "2:3: scheduler.total_steps: missing (OneCycleLR: You must define either total_steps OR (epochs AND "
         "steps_per_epoch))"},
        {SCHED("torch.optim.lr_scheduler.OneCycleLR") "  max_lr: 0.01\n  total_steps: 100\n  pct_start: 0.01\n",
         "5:14: scheduler.pct_start: pct_start x total_steps = 1 leaves OneCycleLR's first phase no steps"},
        {SCHED("torch.optim.lr_scheduler.OneCycleLR") "  max_lr: 0.01\n  total_steps: 100\n  pct_start: 1.5\n",
         "5:14: scheduler.pct_start: must be in [0, 1], got 1.5"},
        {SCHED("torch.optim.lr_scheduler.OneCycleLR") "  max_lr: 0.01\n  total_steps: 100\n  anneal_strategy: exp\n",
         "5:20: scheduler.anneal_strategy: 'exp' is not supported (supported: cos, linear)"},
        {PLATEAU, "2:3: scheduler_monitor: missing (ReduceLROnPlateau steps on a validation metric: set "
                  "scheduler_monitor, e.g. valid/loss"},
        {PLATEAU "scheduler_monitor: valid/loss\nscheduler_interval: step\n",
         "4:21: scheduler_interval: ReduceLROnPlateau steps once per epoch, after the validation: set "
         "scheduler_interval: epoch"},
        {PLATEAU "scheduler_monitor: valid/loss\n", "2:3: scheduler_interval: ReduceLROnPlateau steps once per epoch"},
        {PLATEAU "  factor: 1.0\nscheduler_monitor: valid/loss\nscheduler_interval: epoch\n",
         "3:11: scheduler.factor: Factor should be < 1.0."},
        {PLATEAU "  mode: lowest\n", "3:9: scheduler.mode: 'lowest' is not supported (supported: min, max)"},
        {PLATEAU "  patience: -1\n", "3:13: scheduler.patience: must be >= 0, got -1"},
        {PLATEAU "scheduler_monitor: valid/loss\nscheduler_interval: epoch\ntrainer:\n  check_val_every_n_epoch: 2\n",
         "6:28: trainer.check_val_every_n_epoch: ReduceLROnPlateau steps on valid/loss at every epoch end"},
        {SCHED("espnet2.schedulers.warmup_reducelronplateau.WarmupReduceLROnPlateau"),
         "2:3: scheduler_monitor: missing (WarmupReduceLROnPlateau steps on a validation metric"},
        {SCHED("torch.optim.lr_scheduler.LambdaLR"),
         "2:13: scheduler._target_: torch.optim.lr_scheduler.LambdaLR: its lr_lambda is a Python function"},
        {SCHED("torch.optim.lr_scheduler.CyclicLR"), "2:13: scheduler._target_: torch.optim.lr_scheduler.CyclicLR: "
                                                     "CyclicLR is not built"},
        {SCHED("torch.optim.lr_scheduler.SequentialLR"),
         "2:13: scheduler._target_: torch.optim.lr_scheduler.SequentialLR: it chains scheduler objects"},
        {SCHED("torch.optim.lr_scheduler.CosineAnnealingWarmRestarts"), "2:3: scheduler.T_0: missing"},
        {SCHED("torch.optim.lr_scheduler.CosineAnnealingWarmRestarts") "  T_0: 10\n  T_mult: 0\n",
         "4:11: scheduler.T_mult: must be >= 1, got 0"},
        {SCHED("torch.optim.lr_scheduler.MultiStepLR"), "2:3: scheduler.milestones: missing"},
        {SCHED("torch.optim.lr_scheduler.PolynomialLR") "  total_iters: 0\n",
         "3:16: scheduler.total_iters: must be >= 1 for PolynomialLR"},
        {SCHED("torch.optim.lr_scheduler.PolynomialLR") "  power: -1\n", "3:10: scheduler.power: must be >= 0, got -1"},
        {SCHED("espnet2.schedulers.warmup_step_lr.WarmupStepLR") "  warmup_steps: 0\n",
         "3:17: scheduler.warmup_steps: must be >= 1, got 0 (WarmupStepLR divides by it"},
        {SCHED("espnet2.schedulers.piecewise_linear_warmup_lr.PiecewiseLinearWarmupLR") "  warmup_steps_list: [0, 10, 20]\n",
         "2:3: scheduler.warmup_lr_list: fp and xp are not of the same length (2 lrs for 3 steps"},
        {SCHED("espnet2.schedulers.piecewise_linear_warmup_lr.PiecewiseLinearWarmupLR")
         "  warmup_steps_list: [0, 30, 20]\n  warmup_lr_list: [0, 0.001, 0.002]\n",
         "3:22: scheduler.warmup_steps_list: must not decrease"},
        {SCHED("espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts")
         "  first_cycle_steps: 100\n  warmup_steps: 100\n",
         "4:17: scheduler.warmup_steps: must be in [0, first_cycle_steps) (ESPnet2 asserts"},
        {SCHED("espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts")
         "  first_cycle_steps: 100\n  cycle_mult: 0.5\n", "4:15: scheduler.cycle_mult: must be >= 1, got 0.5"},
        {SCHED("espnet2.schedulers.exponential_decay_warmup.ExponentialDecayWarmup") "  max_lr: 0.001\n  total_steps: 10\n",
         "2:3: scheduler.min_lr: missing or 0 (ExponentialDecayWarmup's final lr, > 0"},
        {SCHED("espnet2.schedulers.tristage_lr.TristageLR") "  decay_ratio: 0.4\n",
         "3:16: scheduler.decay_ratio: The sum of warmup_ratio, hold_ratio, and decay_ratio must be 1.0"},
    };
    expect_errors("--config", cases, sizeof cases / sizeof *cases);
}

/* A recipe's scheduler of another class than the template's replaces the template's block (the
 * template's WarmupLR warmup_steps would change CosineAnnealingWarmupRestarts' default 0); each
 * class's defaults are written. */
Test(config_values, scheduler_block_and_defaults)
{
    const char *path = tpath("sched.yaml");
    test_write_text(path, SCHED("espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts")
                    "  first_cycle_steps: 1000\n");
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 1, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    const scheduler_cfg *sc = ((const training_cfg *)cfg->typed)->scheduler;
    cr_assert_eq(sc->warmup_steps, 0);
    cr_assert_eq(sc->max_lr, 0.1);
    cr_assert_eq(sc->min_lr, 0.001);
    cr_assert_eq(sc->cycle_mult, 1.0);
    config_free(cfg);
    /* the template's own class merges: its warmup_steps stays unless written */
    test_write_text(path, "scheduler:\n  _target_: espnet2.schedulers.warmup_lr.WarmupLR\n");
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 1, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    cr_assert_eq(((const training_cfg *)cfg->typed)->scheduler->warmup_steps, 15000);
    config_free(cfg);
    test_write_text(path, SCHED("torch.optim.lr_scheduler.OneCycleLR") "  max_lr: 0.01\n  total_steps: 100\n");
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 1, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    sc = ((const training_cfg *)cfg->typed)->scheduler;
    cr_assert(sc->cycle_momentum && !sc->three_phase && sc->pct_start == 0.3 && sc->div_factor == 25 &&
              sc->final_div_factor == 1e4 && sc->base_momentum == 0.85 && sc->max_momentum == 0.95 &&
              !strcmp(sc->anneal_strategy, "cos"));
    config_free(cfg);
    test_write_text(path, SCHED("espnet2.schedulers.piecewise_linear_warmup_lr.PiecewiseLinearWarmupLR"));
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 1, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    sc = ((const training_cfg *)cfg->typed)->scheduler;
    cr_assert(sc->n_warmup_steps_list == 2 && sc->warmup_steps_list[1] == 25000 && sc->n_warmup_lr_list == 2 &&
              sc->warmup_lr_list[1] == 0.001);
    config_free(cfg);
    test_write_text(path, PLATEAU "scheduler_monitor: valid/loss\nscheduler_interval: epoch\n");
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 1, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    sc = ((const training_cfg *)cfg->typed)->scheduler;
    cr_assert(!strcmp(sc->mode, "min") && sc->factor == 0.1 && sc->patience == 10 && sc->threshold == 1e-4 &&
              !strcmp(sc->threshold_mode, "rel") && sc->cooldown == 0 && sc->min_lr == 0 && sc->eps == 1e-8);
    config_free(cfg);
}

/* The optimizer's arguments as torch 2.11's __init__ checks them, at their lines: keywords its
 * class does not take, nesterov's rule, momentum and rho; and its implementation switches,
 * refused where they change the update's bits (core/config/config_values.c check_optimizer). */
Test(config_values, optimizer_arguments_as_torch_checks_them)
{
    static const bad_case cases[] = {
        {"optimizer:\n  _target_: torch.optim.SGD\n  betas: [0.9, 0.99]\n",
         "3:10: optimizer.betas: SGD.__init__() got an unexpected keyword argument 'betas' (torch's torch.optim.SGD "
         "takes lr, momentum, dampening, weight_decay, nesterov, maximize, foreach, differentiable, fused)"},
        {"optimizer:\n  _target_: torch.optim.Adam\n  momentum: 0.9\n",
         "3:13: optimizer.momentum: Adam.__init__() got an unexpected keyword argument 'momentum'"},
        {"optimizer:\n  _target_: torch.optim.Adadelta\n  fused: false\n",
         "3:10: optimizer.fused: Adadelta.__init__() got an unexpected keyword argument 'fused'"},
        {"optimizer:\n  _target_: torch.optim.SGD\n  capturable: false\n",
         "3:15: optimizer.capturable: SGD.__init__() got an unexpected keyword argument 'capturable'"},
        {"optimizer:\n  _target_: torch.optim.AdamW\n  decoupled_weight_decay: true\n",
         "3:27: optimizer.decoupled_weight_decay: AdamW.__init__() got an unexpected keyword argument"},
        {"optimizer:\n  _target_: torch.optim.SGD\n  momentum: 0.9\n  dampening: 0.1\n  nesterov: true\n",
         "5:13: optimizer.nesterov: Nesterov momentum requires a momentum and zero dampening (momentum 0.9, "
         "dampening 0.1)"},
        {"optimizer:\n  _target_: torch.optim.SGD\n  nesterov: true\n",
         "3:13: optimizer.nesterov: Nesterov momentum requires a momentum and zero dampening (momentum 0,"},
        {"optimizer:\n  _target_: torch.optim.SGD\n  momentum: -0.5\n",
         "3:13: optimizer.momentum: Invalid momentum value: -0.5"},
        {"optimizer:\n  _target_: torch.optim.Adadelta\n  rho: 1.5\n", "3:8: optimizer.rho: Invalid rho value: 1.5"},
        {"optimizer:\n  _target_: torch.optim.Adam\n  fused: true\n",
         "3:10: optimizer.fused: fused=True runs torch's fused kernel, which rounds otherwise"},
        {"optimizer:\n  _target_: torch.optim.SGD\n  differentiable: true\n",
         "3:19: optimizer.differentiable: torch's step with differentiable=True fails on a model's parameters"},
        {"optimizer:\n  _target_: torch.optim.AdamW\n  capturable: true\n",
         "3:15: optimizer.capturable: capturable=True computes step and the bias corrections as float32 tensors"},
    };
    expect_errors("--config", cases, sizeof cases / sizeof *cases);

    /* What leaves the single-tensor update as it is: any foreach, fused false or null, Adadelta's
     * capturable (its update never reads step); Adadelta's rho defaults to 0.9 and 0 stays 0. */
    static const char *const ok[] = {
        "optimizer:\n  _target_: torch.optim.Adam\n  foreach: true\n  fused: false\n  capturable: false\n"
        "  differentiable: false\n  maximize: true\n",
        "optimizer:\n  _target_: torch.optim.SGD\n  momentum: 0.9\n  nesterov: true\n  foreach: null\n  fused: null\n",
        "optimizer:\n  _target_: torch.optim.Adadelta\n  foreach: false\n  capturable: true\n",
        "optimizer:\n  _target_: torch.optim.Adadelta\n  rho: 0\n",
    };
    const double rho[] = {0, 0, 0.9, 0};
    const char *path = tpath("ok.yaml");
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        test_write_text(path, ok[i]);
        esp_config *cfg;
        esp_err err;
        cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 1, NULL, 0, &cfg, &err), 0, "case %zu: %s", i, err.msg);
        const optimizer_cfg *o = ((const training_cfg *)cfg->typed)->optimizer;
        cr_assert_eq(o->rho, rho[i], "case %zu: rho %g", i, o->rho);
        cr_assert_eq(o->maximize, i == 0);
        config_free(cfg);
    }
}

/* encoder_conf.input_layer (core/config/config_values.c check_input_layer) and normalize_conf.eps. */
Test(config_values, input_layer_rules)
{
    static const bad_case cases[] = {
        {"model:\n  encoder_conf:\n    input_layer: embed\n",
         "3:18: model.encoder_conf.input_layer: embed (nn.Embedding) takes token ids"},
        {"model:\n  encoder: conformer\n  encoder_conf:\n    input_layer: conv1d2\n",
         "4:18: model.encoder_conf.input_layer: conv1d2 is a TransformerEncoder input layer"},
        {"model:\n  encoder: conformer\n  encoder_conf:\n    input_layer: null\n",
         "4:18: model.encoder_conf.input_layer: null (the positional encoding alone) needs the feature dimension "
         "(n_mels = 80) to equal output_size = 256"},
        {"model:\n  encoder_conf:\n    input_layer: 'null'\n", "3:18: model.encoder_conf.input_layer: 'null' in quotes"},
        {"model:\n  encoder_conf:\n    input_layer: conv2d3\n",
         "3:18: model.encoder_conf.input_layer: 'conv2d3' is not supported (supported: conv2d, conv2d2, conv2d6, "
         "conv2d8, conv1d2, linear, embed, null)"},
        {"model:\n  frontend_conf:\n    n_mels: 12\n  encoder_conf:\n    input_layer: conv2d8\n",
         "3:13: model.frontend_conf.n_mels: is below 15, the least the encoder's conv2d8 input layer can subsample"},
        {"model:\n  normalize: utterance_mvn\n  normalize_conf:\n    eps: 0\n",
         "4:10: model.normalize_conf.eps: must be > 0, got 0"},
    };
    expect_errors("--config", cases, sizeof cases / sizeof *cases);
    /* null is a value: kept (as the plain scalar null) through validation, typed as "null". */
    const char *path = tpath("null.yaml");
    test_write_text(path, "model:\n  encoder_conf:\n    input_layer: ~\n  normalize_conf:\n    eps: 1.0e-5\n");
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    cr_assert_str_eq(t->model->encoder_conf->input_layer, "null");
    cr_assert_eq(t->model->normalize_conf->eps, 1e-5);
    model_dims d;
    cr_assert_eq(model_dims_from_cfg(&d, t->model, 16, 10, &err), 0, "%s", err.msg);
    cr_assert_eq(d.input_layer, IN_NONE);
    const char *out = tpath("resolved.yaml");
    cr_assert_eq(config_write_resolved(cfg, out, &err), 0, "%s", err.msg);
    config_free(cfg);
    cr_assert_eq(cfg_load(CONFIG_TRAINING, out, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    t = cfg->typed;
    cr_assert_str_eq(t->model->encoder_conf->input_layer, "null", "the resolved config keeps null");
    config_free(cfg);
}

/* A float is written back as the shortest decimal that reads as the same double: 0.3 stays "0.3"
 * in the resolved config.yaml (not 0.29999999999999999), and reads back bit for bit. */
Test(config_values, floats_keep_their_short_form_in_the_resolved_config)
{
    const char *path = tpath("floats.yaml");
    test_write_text(path, "model:\n  model_conf:\n    ctc_weight: 0.3\n    lsm_weight: 1.0e-1\noptimizer:\n"
                          "  lr: 0.0021\n  weight_decay: 0.1234567890123456789\n");
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    double ctc = t->model->model_conf->ctc_weight, lsm = t->model->model_conf->lsm_weight;
    cr_assert_eq(ctc, 0.3);
    const char *out = tpath("resolved_floats.yaml");
    cr_assert_eq(config_write_resolved(cfg, out, &err), 0, "%s", err.msg);
    config_free(cfg);
    char *text = test_slurp(out);
    cr_assert(strstr(text, "ctc_weight: 0.3\n") && strstr(text, "lsm_weight: 0.1\n") && strstr(text, "lr: 0.0021\n"),
              "%s", text);
    cr_assert_null(strstr(text, "99999"), "%s", text);
    free(text);
    cr_assert_eq(cfg_load(CONFIG_TRAINING, out, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    t = cfg->typed;
    cr_assert_eq(t->model->model_conf->ctc_weight, ctc);
    cr_assert_eq(t->model->model_conf->lsm_weight, lsm);
    config_free(cfg);
}

Test(config_values, inference_and_metrics_ranges)
{
    static const bad_case inference[] = {
        {"model:\n  batch_size: 0\n", "2:15: model.batch_size: must be in [1, 4096], got 0"},
        {"model:\n  batch_size: 5000\n", "2:15: model.batch_size: must be in [1, 4096], got 5000"},
        {"model:\n  beam_size: 0\n", "2:14: model.beam_size: must be in [1, 10000], got 0 (1: greedy CTC; leave it out for 1)"},
        {"model:\n  nbest: 0\n", "2:10: model.nbest: must be in [1, 1000], got 0 (leave it out for 1)"},
        {"parallel:\n  n_workers: 0\n", "2:14: parallel.n_workers: must be in [1, 4096], got 0"},
    };
    expect_errors("--inference_config", inference, sizeof inference / sizeof *inference);
    static const bad_case metrics[] = {
        {"parallel:\n  n_workers: -3\n", "2:14: parallel.n_workers: must be in [1, 4096], got -3"},
    };
    expect_errors("--metrics_config", metrics, 1);
}

/* The longform: block (stage 6's and the library's long recordings): ranges, the overlap at most
 * half the window (a key left out counting as its default), its defaults in the typed view. */
Test(config_values, longform_ranges_and_the_overlap_rule)
{
    static const bad_case cases[] = {
        {"longform:\n  window: 0\n", "2:11: longform.window: must be in (0, 3600] seconds, got 0 (seconds per "
                                      "window; leave it out for 10.0)"},
        {"longform:\n  window: 4000\n", "2:11: longform.window: must be in (0, 3600] seconds, got 4000"},
        {"longform:\n  overlap: 0\n", "2:12: longform.overlap: must be in (0, 1800] seconds, got 0"},
        {"longform:\n  threshold: -1\n", "2:14: longform.threshold: must be >= 0 seconds, got -1 (items longer than "
                                          "this are decoded in windows; leave it out for 30.0)"},
        {"longform:\n  enabled: maybe\n", "2:12: longform.enabled: expected true or false, got a string 'maybe'"},
        {"longform:\n  windows: 8\n", "2:3: longform.windows: unknown key (did you mean window?)"},
        {"longform:\n  window: 10\n  overlap: 6\n", "3:12: longform.overlap: an overlap of 6 s is more than half "
                                                     "the window of 10 s (shorten longform.overlap or lengthen "
                                                     "longform.window)"},
        /* the default overlap (2 s) against a window of 3 s: at the window's line */
        {"longform:\n  window: 3\n", "2:11: longform.window: an overlap of 2 s is more than half the window of 3 s"},
        /* the default window (10 s) */
        {"longform:\n  overlap: 6\n", "2:12: longform.overlap: an overlap of 6 s is more than half the window of "
                                       "10 s"},
    };
    expect_errors("--inference_config", cases, sizeof cases / sizeof *cases);
    esp_config *cfg;
    esp_err err;
    const char *path = tpath("lf.yaml");
    test_write_text(path, "longform:\n  window: 16\n  overlap: 8\n");
    cr_assert_eq(cfg_load(CONFIG_INFERENCE, path, 1, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    const longform_cfg *lf = ((const inference_cfg *)cfg->typed)->longform;
    cr_assert_not_null(lf);
    cr_expect(lf->enabled && lf->window == 16 && lf->overlap == 8 && lf->threshold == 30, "%d %g %g %g", lf->enabled,
              lf->window, lf->overlap, lf->threshold);
    config_free(cfg);
    test_write_text(path, "model:\n  beam_size: 4\n");
    cr_assert_eq(cfg_load(CONFIG_INFERENCE, path, 1, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    lf = ((const inference_cfg *)cfg->typed)->longform;
    cr_assert_not_null(lf, "the block is made when left out");
    cr_expect(lf->enabled && lf->window == 10 && lf->overlap == 2 && lf->threshold == 30, "%d %g %g %g", lf->enabled,
              lf->window, lf->overlap, lf->threshold);
    config_free(cfg);
}

Test(config_values, value_through_interpolation_names_both_places)
{
    static const bad_case cases[] = {
        {"dataset:\n  zero: 0\ntrainer:\n  devices: ${dataset.zero}\n", "2:9: trainer.devices: must be >= 1, got 0 ("},
    };
    expect_errors("--config", cases, 1);
    const bin_run *r = cfg_run_bin(tmp, (const char *const[]){"--config", tpath("bad.yaml"), "--dry_run", NULL});
    assert_has(r->err, "(via the interpolation at %s:4:12)", tpath("bad.yaml"));
}

/* ---- absent keys keep their defaults --------------------------------------------------------- */

Test(config_values, absent_keys_keep_defaults)
{
    const char *path = tpath("ok.yaml");
    test_write_text(path, "trainer:\n  max_epochs: 3\nparallel:\n  env: local\n");
    esp_config *cfg;
    esp_err err;
    /* Without the template, the defaults declared with the keys (config_values.c) in the typed
     * view; the resolved tree (config.yaml, --dry_run) keeps what was written. */
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    cr_assert_eq(t->trainer->devices, 1);
    cr_assert_eq(t->trainer->num_nodes, 1);
    cr_assert_eq(t->trainer->accumulate_grad_batches, 1);
    cr_assert_eq(t->trainer->log_every_n_steps, 50);
    cr_assert_eq(t->trainer->num_sanity_val_steps, 2);
    cr_assert_eq(t->trainer->max_steps, -1);
    cr_assert_eq(t->trainer->max_epochs, 3);
    cr_assert_eq(t->parallel->n_workers, 1);
    cr_assert_null(yt_get_path(cfg->tree, "trainer.devices"));
    cr_assert_str_eq(yt_get_path(cfg->full, "trainer.devices")->str, "1");
    config_free(cfg);
    /* No trainer block: Lightning's Trainer() with all its defaults. */
    test_write_text(path, "seed: 1\n");
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    t = cfg->typed;
    cr_assert_not_null(t->trainer);
    cr_assert_eq(t->trainer->max_epochs, 1000);
    cr_assert_eq(t->trainer->devices, 1);
    cr_assert_null(t->tokenizer); /* a block without MAKE_BLOCK stays left out */
    config_free(cfg);
    /* Written values win over the defaults, 0 where it means something included. */
    test_write_text(path, "trainer:\n  num_sanity_val_steps: 0\n  log_every_n_steps: 7\n");
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    t = cfg->typed;
    cr_assert_eq(t->trainer->num_sanity_val_steps, 0);
    cr_assert_eq(t->trainer->log_every_n_steps, 7);
    config_free(cfg);
    test_write_text(path, "trainer:\n  max_epochs: 3\nparallel:\n  env: local\n");
    /* With it, the template's values. */
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 1, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    t = cfg->typed;
    cr_assert_eq(t->trainer->devices, 1);
    cr_assert_eq(t->trainer->accumulate_grad_batches, 1);
    cr_assert_eq(t->trainer->max_epochs, 3);
    cr_assert_eq(t->parallel->n_workers, 1);
    config_free(cfg);
    /* Values that mean something at 0 are accepted. */
    test_write_text(path, "trainer:\n  gradient_clip_val: 0\n  num_sanity_val_steps: 0\noptimizer:\n  weight_decay: 0\n"
                          "dataloader:\n  train:\n    iter_factory:\n      num_workers: 0\n");
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 1, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    config_free(cfg);
    /* sorted batches with batch_size (batch_bins left from the template is unused). */
    test_write_text(path, "dataloader:\n  train:\n    iter_factory:\n      batches:\n        type: unsorted\n"
                          "        batch_size: 4\n");
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 1, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    config_free(cfg);
}

/* Defaults that depend on another key, class defaults of callbacks, and an alias: all in the typed
 * view and in --show_config, none in the resolved tree. */
Test(config_values, conditional_class_and_alias_defaults)
{
    const char *path = tpath("ok.yaml");
    test_write_text(path, "model:\n  normalize: utterance_mvn\ntrainer:\n  callbacks:\n"
                          "    - _target_: lightning.pytorch.callbacks.EMAWeightAveraging\n"
                          "    - _target_: pytorch_lightning.callbacks.EarlyStopping\n      monitor: valid/loss\n"
                          "parallel:\n  env: local_gpu\n");
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    cr_assert_not_null(t->model->normalize_conf, "normalize is set: its block is made");
    cr_assert_eq(t->model->normalize_conf->eps, 1e-20);
    cr_assert_eq(t->model->normalize_conf->norm_means, 1);
    cr_assert_eq(t->model->normalize_conf->norm_vars, 0); /* utterance_mvn's */
    cr_assert_null(yt_get_path(cfg->tree, "model.normalize_conf"));
    cr_assert_eq(t->trainer->dist_timeout, 300);
    const callback_cfg *ema = &t->trainer->callbacks[0], *es = &t->trainer->callbacks[1];
    cr_assert_eq(ema->decay, 0.999);
    cr_assert_eq(ema->update_every_n_steps, 1);
    cr_assert_eq(ema->use_buffers, 1);
    cr_assert_eq(es->patience, 3);
    cr_assert(es->strict && es->check_finite);
    cr_assert_null(yt_map_get(yt_get_path(cfg->tree, "trainer.callbacks")->items[0], "decay"));
    cr_assert_eq(t->parallel->n_workers, 0); /* local_gpu: one per GPU, resolved by the runner */
    config_free(cfg);
    /* normalize null (none): no block; written values win. */
    test_write_text(path, "model:\n  encoder: transformer\n  normalize: null\ntrainer:\n  dist_timeout: 7\n"
                          "  callbacks:\n"
                          "    - _target_: lightning.pytorch.callbacks.EMAWeightAveraging\n      decay: 0.5\n"
                          "      use_buffers: false\n");
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    t = cfg->typed;
    cr_assert_null(t->model->normalize_conf);
    cr_assert_eq(t->trainer->dist_timeout, 7);
    cr_assert_eq(t->trainer->callbacks[0].decay, 0.5);
    cr_assert_eq(t->trainer->callbacks[0].use_buffers, 0);
    cr_assert_eq(t->trainer->callbacks[0].update_every_n_steps, 1);
    config_free(cfg);
    /* The inference alias: batch_size is model.batch_size; neither written: 1. */
    test_write_text(path, "batch_size: 4\nmodel:\n  beam_size: 2\n");
    cr_assert_eq(cfg_load(CONFIG_INFERENCE, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    cr_assert_eq(((const inference_cfg *)cfg->typed)->model->batch_size, 4);
    cr_assert_null(yt_get_path(cfg->tree, "model.batch_size"));
    config_free(cfg);
    test_write_text(path, "model:\n  beam_size: 2\n");
    cr_assert_eq(cfg_load(CONFIG_INFERENCE, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    cr_assert_eq(((const inference_cfg *)cfg->typed)->model->batch_size, 1);
    config_free(cfg);
    static const bad_case both[] = {
        {"batch_size: 4\nmodel:\n  batch_size: 2\n",
         "1:13: batch_size: 4 and model.batch_size: 2 disagree (they say the same thing: keep one)"},
    };
    expect_errors("--inference_config", both, 1);
    /* --show_config prints them. */
    test_write_text(path, "model:\n  normalize: global_mvn\n");
    const bin_run *r = CFG_RUN(tmp, "--config", path, "--template_dir", "", "--show_config");
    cr_assert_eq(r->status, 0, "%s", r->err);
    assert_has(r->out, "  dist_timeout: 300\n");
    assert_has(r->out, "  normalize_conf:\n    eps: 1e-20\n    norm_means: true\n    norm_vars: true\n");
}

/* ESPnet2's augmentation keys of dataset.preprocessor: their defaults in the typed view and in
 * --show_config (the resolved tree keeps what was written); a bad value, a list's item or an entry
 * deep in data_aug_effects, is one line at its own position. */
Test(config_values, preprocessor_augmentation_keys)
{
    const char *path = tpath("ok.yaml");
    test_write_text(path, "dataset:\n  preprocessor:\n    fs: 16000\n");
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    const preprocessor_cfg *p = ((const training_cfg *)cfg->typed)->dataset->preprocessor;
    cr_assert_eq(p->n_data_aug_num, 2u);
    cr_assert(p->data_aug_num[0] == 1 && p->data_aug_num[1] == 1);
    cr_assert_eq(p->data_aug_prob, 0.0);
    cr_assert_eq(p->rir_apply_prob, 1.0);
    cr_assert_eq(p->noise_apply_prob, 1.0);
    cr_assert_str_eq(p->noise_db_range, "3_10");
    cr_assert_eq(p->short_noise_thres, 0.5);
    cr_assert_null(yt_get_path(cfg->tree, "dataset.preprocessor.data_aug_num"));
    config_free(cfg);
    /* written values win */
    test_write_text(path, "dataset:\n  preprocessor:\n    data_aug_num: [0, 3]\n    noise_db_range: \"5\"\n");
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    p = ((const training_cfg *)cfg->typed)->dataset->preprocessor;
    cr_assert(p->data_aug_num[0] == 0 && p->data_aug_num[1] == 3);
    cr_assert_str_eq(p->noise_db_range, "5");
    config_free(cfg);
    test_write_text(path, "dataset:\n  preprocessor:\n    fs: 16000\n");
    const bin_run *r = CFG_RUN(tmp, "--config", path, "--template_dir", "", "--show_config");
    cr_assert_eq(r->status, 0, "%s", r->err);
    assert_has(r->out, "    data_aug_prob: 0.0\n");
    assert_has(r->out, "    rir_apply_prob: 1.0\n");
    assert_has(r->out, "    noise_db_range: \"3_10\"\n");
    assert_has(r->out, "    short_noise_thres: 0.5\n");
    assert_has(r->out, "    data_aug_num:\n    - 1\n    - 1\n");
    static const bad_case cases[] = {
        {"dataset:\n  preprocessor:\n    data_aug_prob: 1.5\n",
         "3:20: dataset.preprocessor.data_aug_prob: must be in [0, 1], got 1.5 (the share of utterances augmented; "
         "leave it out for 0.0)"},
        {"dataset:\n  preprocessor:\n    data_aug_num: [1, 65]\n",
         "3:23: dataset.preprocessor.data_aug_num[1]: must be an integer in [0, 64], got 65"},
        {"dataset:\n  preprocessor:\n    noise_db_range: \"10_3\"\n",
         "3:21: dataset.preprocessor.noise_db_range: '10_3': low 10 is above high 3"},
        {"dataset:\n  preprocessor:\n    rir_apply_prob: -0.1\n",
         "3:21: dataset.preprocessor.rir_apply_prob: must be in [0, 1], got -0.1"},
        {"dataset:\n  preprocessor:\n    data_aug_prob: 1.0\n    data_aug_effects:\n"
         "      - [0.5, \"reverse\"]\n      - [0.5, \"lowpass\", {\"cutoff_freq\": 1000, \"Q\": 0}]\n",
         "6:53: dataset.preprocessor.data_aug_effects[1][2].Q: must be in (0, 100], got 0 (0.707: Butterworth)"},
        {"dataset:\n  preprocessor:\n    data_aug_effects:\n      - - 0.5\n        - - [1, \"reverse\"]\n"
         "          - [0, \"reverse\"]\n",
         "6:14: dataset.preprocessor.data_aug_effects[0][1][1][0]: must be in (0, 1e+06], got 0 (an entry's weight)"},
        {"dataset:\n  preprocessor:\n    data_aug_effects:\n      - [1, \"reverse\"]\n    data_aug_num: [1, 2]\n",
         "5:19: dataset.preprocessor.data_aug_num: max 2 is more than the 1 entries of data_aug_effects"},
    };
    expect_errors("--config", cases, sizeof cases / sizeof *cases);
}

/* Every declared default is a value its key's range rule accepts (a switch's: a boolean), and the
 * rule's message names it. */
Test(config_values, defaults_are_in_range)
{
    size_t n;
    const config_default *d = config_defaults(&n);
    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++) {
        esp_err err;
        int b;
        ynode *bv = yt_scalar(d[i].value, 0, (ymark){0});
        int is_switch = yt_as_bool(bv, &b);
        yt_free(bv);
        if (is_switch) continue; /* longform.enabled: a boolean has no range */
        cr_assert_str_eq(config_default_value(d[i].path), d[i].value);
        if (d[i].value[0] == '"') continue; /* a string: noise_db_range, checked below */
        /* "[a, b]": each item against the rule of path[] */
        int list = d[i].value[0] == '[';
        char *items = xstrdup(d[i].value + list), *rule = xasprintf("%s%s", d[i].path, list ? "[]" : "");
        for (char *save = NULL, *it = strtok_r(items, ", ]", &save); it; it = strtok_r(NULL, ", ]", &save)) {
            ynode *v = yt_scalar(it, 0, (ymark){0});
            double x;
            cr_assert(yt_as_float(v, &x), "%s: %s", d[i].path, d[i].value);
            cr_assert_eq(config_check_number(v, rule, d[i].path, x, &err), 0, "%s: %s", d[i].path, err.msg);
            yt_free(v);
        }
        free(items), free(rule);
    }
    ynode *db = yt_scalar("3_10", 1, (ymark){0});
    double lo, hi;
    esp_err err;
    cr_assert_str_eq(config_default_value("dataset.preprocessor.noise_db_range"), "\"3_10\"");
    cr_assert_eq(config_db_range(db, "noise_db_range", &lo, &hi, &err), 0, "%s", err.msg);
    cr_assert(lo == 3 && hi == 10);
    yt_free(db);
    static const bad_case cases[] = {
        {"trainer:\n  log_every_n_steps: 0\n",
         "2:22: trainer.log_every_n_steps: must be >= 1, got 0 (optimizer steps between two logged losses; leave it "
         "out for 50)"},
        {"trainer:\n  num_nodes: 0\n", "2:14: trainer.num_nodes: must be >= 1, got 0 (leave it out for 1)"},
    };
    expect_errors("--config", cases, sizeof cases / sizeof *cases);
}

/* ---- Lightning's max_epochs ------------------------------------------------------------------- */

static int saved_stderr = -1;
static void capture_begin(void)
{
    fflush(stderr);
    saved_stderr = dup(2);
    int fd = open(tpath("stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0);
    dup2(fd, 2);
    close(fd);
    log_set_quiet(0);
}
static const char *capture_end(void)
{
    static char buf[1 << 14];
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    log_set_quiet(1);
    char *text = test_slurp(tpath("stderr.txt"));
    snprintf(buf, sizeof buf, "%s", text);
    free(text);
    return buf;
}

/* Loads text over the template; returns trainer.max_epochs and what the load logged. */
static int64_t max_epochs_of(const char *text, const char **logged)
{
    const char *path = tpath("epochs.yaml");
    test_write_text(path, text);
    esp_config *cfg;
    esp_err err;
    capture_begin();
    int rc = cfg_load(CONFIG_TRAINING, path, 1, NULL, 0, &cfg, &err);
    *logged = capture_end();
    cr_assert_eq(rc, 0, "%s", err.msg);
    int64_t v = ((const training_cfg *)cfg->typed)->trainer->max_epochs;
    /* The resolved config says the same as the typed view. */
    const ynode *n = yt_get_path(cfg->tree, "trainer.max_epochs");
    cr_assert_not_null(n);
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)v);
    cr_assert_str_eq(n->str, num);
    config_free(cfg);
    return v;
}

Test(config_values, lightning_max_epochs_meanings)
{
    const char *log;
    cr_assert_eq(max_epochs_of("trainer:\n  max_epochs: 4\n", &log), 4);
    cr_assert_null(strstr(log, "max_epochs"), "%s", log);

    /* null (or left out): Lightning's default of 1000 epochs while max_steps is unset. */
    cr_assert_eq(max_epochs_of("trainer:\n  max_epochs: null\n", &log), 1000);
    assert_has(log, "trainer.max_epochs: not set: Lightning's default, 1000 epochs");
    cr_assert_eq(max_epochs_of("trainer:\n  max_epochs: null\n  max_steps: -1\n", &log), 1000);

    /* null with max_steps set: no epoch limit (-1); max_steps ends training. */
    cr_assert_eq(max_epochs_of("trainer:\n  max_epochs: ~\n  max_steps: 500\n", &log), -1);
    assert_has(log, "trainer.max_epochs: not set and trainer.max_steps is 500: no epoch limit (Lightning)");

    /* -1: train without an epoch limit (until max_steps, or until stopped). */
    cr_assert_eq(max_epochs_of("trainer:\n  max_epochs: -1\n", &log), -1);
    assert_has(log, "%s:2:15: trainer.max_epochs: -1: no epoch limit (Lightning); training runs until it is stopped",
               tpath("epochs.yaml"));
    cr_assert_eq(max_epochs_of("trainer:\n  max_epochs: -1\n  max_steps: 100\n", &log), -1);
    assert_has(log, "training runs until trainer.max_steps");
}

/* ---- before any stage runs -------------------------------------------------------------------- */

Test(config_values, bad_values_stop_before_any_stage)
{
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/conf", test_root_dir());
    const char *path = tpath("conf/bad.yaml");
    test_write_text_mkdirs(path, "recipe_dir: ${config_path:..}\ndataloader:\n  train:\n    iter_factory:\n"
                                 "      batches:\n        type: sorted\n        batch_size: 0\n");
    const bin_run *r = CFG_RUN(tmp, "--config", path, "--template_dir", tdir, "--stages", "train", "--quiet");
    cr_assert_eq(r->status, 1, "stderr:\n%s", r->err);
    cr_assert_eq(cfg_count_lines(r->err), 1, "stderr:\n%s", r->err);
    assert_has(r->err, "espnet3: error: %s:7:21: dataloader.train.iter_factory.batches.batch_size: must be >= 1", path);
    cr_assert(!test_exists(tpath("exp")), "the experiment folder was created");
}
