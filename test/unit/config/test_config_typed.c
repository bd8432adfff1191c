/* The config system, part two of suite `config` (declared in test_config.c): typed values (type
 * errors with positions, bools, floats, best_model_criterion, loggers, nulls), implemented,
 * unimplemented and unknown keys, allowed values and _target_, and the YAML blocks of the ESPnet3
 * documentation. Helpers: config_suite_util.{h,c}. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "core/config/config.h"
#include "core/config/config_schema.h"
#include "test/unit/config/config_suite_util.h"

/* ---- typed values --------------------------------------------------------------------------- */

Test(config, type_error_names_position)
{
    const char *msg = load_error("seed: 1\ntrainer:\n  devices: abc\n");
    assert_has(msg, "%s:3:12: trainer.devices: expected an integer, got a string 'abc'", tpath("cfg.yaml"));
    msg = load_error("optimizer:\n  lr: fast\n");
    assert_has(msg, "%s:2:7: optimizer.lr: expected a number", tpath("cfg.yaml"));
    msg = load_error("trainer: 3\n");
    assert_has(msg, "%s:1:10: trainer: expected a mapping", tpath("cfg.yaml"));
    msg = load_error("create_dataset:\n  func: espeak_fortunes\n  train_voices: en-us\n");
    assert_has(msg, "create_dataset.train_voices: expected a list");
    msg = load_error("create_dataset:\n  func: espeak_fortunes\n  train_voices: [a, [b]]\n");
    assert_has(msg, "create_dataset.train_voices[1]: expected a string");
}

Test(config, type_error_through_interpolation_names_source_and_site)
{
    const char *msg = load_error("exp_tag: abc\ntrainer:\n  devices: ${exp_tag}\n");
    assert_has(msg, "%s:1:10: trainer.devices: expected an integer, got a string 'abc'", tpath("cfg.yaml"));
    assert_has(msg, "(via the interpolation at %s:3:12)", tpath("cfg.yaml"));
}

Test(config, bools_normalized)
{
    esp_config *cfg;
    const training_cfg *t = must_load("trainer:\n  deterministic: True\n  enable_progress_bar: off\n"
                                      "dataloader:\n  train:\n    multiple_iterator: yes\n"
                                      "    iter_factory:\n      shuffle: YES\n  valid:\n    multiple_iterator: No\n",
                                      &cfg);
    cr_assert_eq(t->trainer->deterministic, 1);
    cr_assert_eq(t->trainer->enable_progress_bar, 0);
    cr_assert_eq(t->dataloader->train->multiple_iterator, 1);
    cr_assert_eq(t->dataloader->train->iter_factory->shuffle, 1);
    cr_assert_eq(t->dataloader->valid->multiple_iterator, 0);
    config_free(cfg);

    const char *msg = load_error("trainer:\n  deterministic: maybe\n");
    assert_has(msg, "trainer.deterministic: expected true or false");
}

Test(config, floats_accept_ints)
{
    esp_config *cfg;
    const training_cfg *t =
        must_load("trainer:\n  gradient_clip_val: 5\noptimizer:\n  lr: 1\n  betas: [0, 0]\n  eps: 1e-8\n", &cfg);
    cr_assert_float_eq(t->trainer->gradient_clip_val, 5.0, 1e-12);
    cr_assert_float_eq(t->optimizer->lr, 1.0, 1e-12);
    cr_assert_eq(t->optimizer->n_betas, 2);
    cr_assert_float_eq(t->optimizer->betas[1], 0.0, 1e-12);
    cr_assert_float_eq(t->optimizer->eps, 1e-8, 1e-20);
    config_free(cfg);
}

Test(config, best_model_criterion_triples)
{
    esp_config *cfg;
    const training_cfg *t = must_load("best_model_criterion:\n  - - valid/loss\n    - 3\n    - min\n"
                                      "  - [valid/acc, 1, max]\n",
                                      &cfg);
    cr_assert_eq(t->n_best_model_criterion, 2);
    cr_assert_str_eq(t->best_model_criterion[0].monitor, "valid/loss");
    cr_assert_eq(t->best_model_criterion[0].nbest, 3);
    cr_assert_str_eq(t->best_model_criterion[0].mode, "min");
    cr_assert_str_eq(t->best_model_criterion[1].monitor, "valid/acc");
    cr_assert_str_eq(t->best_model_criterion[1].mode, "max");
    config_free(cfg);

    t = must_load("best_model_criterion: [[valid/loss, 3, min]]\n", &cfg);
    cr_assert_eq(t->n_best_model_criterion, 1);
    config_free(cfg);

    const char *msg = load_error("best_model_criterion: [[valid/loss, 3]]\n");
    assert_has(msg, "%s:1:24: best_model_criterion[0]: expected [monitor, nbest, mode]", tpath("cfg.yaml"));
    assert_has(msg, "got 2 items");
    msg = load_error("best_model_criterion: [[valid/loss, 3, sideways]]\n");
    assert_has(msg, "best_model_criterion[0].mode: 'sideways' is not supported (supported: min");
    msg = load_error("best_model_criterion: [[valid/loss, three, min]]\n");
    assert_has(msg, "best_model_criterion[0].nbest: expected an integer");
}

Test(config, single_logger_mapping_is_a_list_of_one)
{
    esp_config *cfg;
    const training_cfg *t = must_load("trainer:\n  logger:\n    _target_: lightning.pytorch.loggers.TensorBoardLogger\n"
                                      "    save_dir: tb\n    name: tb_logger\n",
                                      &cfg);
    cr_assert_eq(t->trainer->n_logger, 1);
    cr_assert_str_eq(t->trainer->logger[0].target, "lightning.pytorch.loggers.TensorBoardLogger");
    cr_assert_str_eq(t->trainer->logger[0].save_dir, "tb");
    cr_assert_str_eq(t->trainer->logger[0].name, "tb_logger");
    cr_assert_eq(yt_get_path(cfg->tree, "trainer.logger")->kind, YN_SEQ);
    config_free(cfg);
}

Test(config, null_values_leave_fields_unset)
{
    esp_config *cfg;
    const training_cfg *t = must_load("exp_tag: ~\ntrainer:\n  max_epochs: null\n  devices: 2\n", &cfg);
    cr_assert_null(t->exp_tag);
    cr_assert_eq(t->trainer->max_epochs, 1000); /* null: Lightning's default (see test_config_values.c) */
    cr_assert_eq(t->trainer->devices, 2);
    config_free(cfg);
}

/* ---- implemented / unimplemented / unknown keys --------------------------------------------- */

Test(config, implemented_key_loads)
{
    esp_config *cfg;
    const training_cfg *t = must_load("trainer:\n  max_epochs: 3\n  accumulate_grad_batches: 2\n", &cfg);
    cr_assert_eq(t->trainer->max_epochs, 3);
    cr_assert_eq(t->trainer->accumulate_grad_batches, 2);
    config_free(cfg);
}

Test(config, unimplemented_key_warns_once_and_is_dropped)
{
    esp_config *cfg;
    esp_err err;
    const char *path = fixture("cfg.yaml", "trainer:\n  benchmark: true\n  max_epochs: 2\n  detect_anomaly: true\n"
                                           "model:\n  preencoder: null\n  preencoder_conf: {}\n");
    capture_begin();
    int rc = load_file(path, NULL, 0, &cfg, &err);
    const char *out = capture_end();
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(count_lines_with(out, "WARNING"), 2, "stderr:\n%s", out);
    cr_assert_eq(count_lines_with(out, "trainer.benchmark"), 1, "stderr:\n%s", out);
    cr_assert_eq(count_lines_with(out, "trainer.detect_anomaly"), 1, "stderr:\n%s", out);
    assert_has(out, "%s:2:3: trainer.benchmark: ", tpath("cfg.yaml"));
    assert_has(out, "not implemented");
    cr_assert_null(yt_get_path(cfg->tree, "trainer.benchmark"));
    cr_assert_null(yt_get_path(cfg->tree, "model.preencoder")); /* null: nothing to build, said nothing */
    cr_assert_eq(((const training_cfg *)cfg->typed)->trainer->max_epochs, 2);
    config_free(cfg);
}

/* A key that would change the model is refused at its line, never only warned about. */
Test(config, a_model_key_espnet3_does_not_build_is_refused_at_its_line)
{
    esp_config *cfg;
    esp_err err;
    const char *path = fixture("cfg.yaml", "model:\n  postencoder: hugging_face_transformers\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:2:16: model.postencoder: ESPnet2's postencoder", tpath("cfg.yaml"));
    path = fixture("cfg1.yaml", "model:\n  preencoder: sinc\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:2:15: model.preencoder: 'sinc' is not supported (supported: linear)", tpath("cfg1.yaml"));
    path = fixture("cfg2.yaml", "model:\n  model_conf:\n    interctc_weight: 1.0\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:3:22: model.model_conf.interctc_weight: must be in [0, 1)", tpath("cfg2.yaml"));
    path = fixture("cfg3.yaml", "model:\n  model_conf:\n    interctc_weight: 0.0\n");
    cr_assert_eq(load_file(path, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    config_free(cfg);
    /* ESPnet2 keys with a value that changes nothing (its default): that value passes, another is
     * refused at its line with what to write. */
    path = fixture("cfg4.yaml", "model:\n  ctc_conf:\n    ctc_type: brctc\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:3:15: model.ctc_conf.ctc_type: espnet3's CTC is ESPnet2's builtin one", tpath("cfg4.yaml"));
    assert_has(err.msg, "%s", "(remove it, or write builtin)");
    path = fixture("cfg_mb1.yaml", "model:\n  model_conf:\n    transducer_multi_blank_durations: [2, 4]\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:3:39: model.model_conf.transducer_multi_blank_durations: ESPnet2's multi-blank transducer",
               tpath("cfg_mb1.yaml"));
    path = fixture("cfg_mb2.yaml", "model:\n  model_conf:\n    transducer_multi_blank_durations: []\n"
                                "    transducer_multi_blank_sigma: 0.05\n");
    cr_assert_eq(load_file(path, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    config_free(cfg);
    path = fixture("cfg5.yaml", "model:\n  frontend_conf:\n    window: hamming\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:3:13: model.frontend_conf.window: the STFT window is hann", tpath("cfg5.yaml"));
    /* Lightning's switches that change what is trained or kept: refused unless they say the default */
    path = fixture("cfg7.yaml", "trainer:\n  fast_dev_run: 5\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:2:17: trainer.fast_dev_run: Lightning's debug run", tpath("cfg7.yaml"));
    path = fixture("cfg8.yaml", "trainer:\n  enable_checkpointing: false\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:2:25: trainer.enable_checkpointing: checkpoints are always written", tpath("cfg8.yaml"));
    path = fixture("cfg9.yaml", "trainer:\n  fast_dev_run: false\n  overfit_batches: 0.0\n  enable_checkpointing: true\n"
                                "  barebones: false\n");
    cr_assert_eq(load_file(path, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    config_free(cfg);
    path = fixture("cfg6.yaml", "model:\n  ctc_conf:\n    ctc_type: builtin\n  frontend_conf:\n    window: hann\n"
                                "    center: true\n    htk: false\n  specaug_conf:\n    replace_with_zero: true\n");
    cr_assert_eq(load_file(path, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    config_free(cfg);
}

Test(config, flash_attention_switches_warn_in_encoder_and_decoder)
{
    esp_config *cfg;
    esp_err err;
    const char *path = fixture("cfg.yaml", "model:\n  encoder_conf:\n    use_flash_attn: true\n"
                                           "  decoder_conf:\n    use_flash_attn: true\n");
    capture_begin();
    int rc = load_file(path, NULL, 0, &cfg, &err);
    const char *out = capture_end();
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(count_lines_with(out, "model.encoder_conf.use_flash_attn"), 1, "stderr:\n%s", out);
    cr_assert_eq(count_lines_with(out, "model.decoder_conf.use_flash_attn"), 1, "stderr:\n%s", out);
    config_free(cfg);
}

Test(config, unknown_key_suggests_closest)
{
    const char *msg = load_error("trainer:\n  max_epoch: 3\n");
    assert_has(msg, "%s:2:3: trainer.max_epoch: unknown key (did you mean max_epochs?)", tpath("cfg.yaml"));
    msg = load_error("optimiser:\n  lr: 1\n");
    assert_has(msg, "optimiser: unknown key (did you mean optimizer?)");
    msg = load_error("completely_unrelated_key: 1\n");
    assert_has(msg, "completely_unrelated_key: unknown key");
    cr_assert_null(strstr(msg, "did you mean"), "%s", msg);
}

/* ---- allowed values and _target_ ------------------------------------------------------------ */

Test(config, allowed_values)
{
    const char *msg = load_error("parallel:\n  env: dask\n");
    assert_has(msg, "%s:2:8: parallel.env: 'dask' is not supported", tpath("cfg.yaml"));
    assert_has(msg, "local");
    assert_has(msg, "local_gpu");
    assert_has(msg, "slurm");
    msg = load_error("trainer:\n  strategy: deepspeed\n");
    assert_has(msg, "trainer.strategy: 'deepspeed' is not supported");
    assert_has(msg, "ddp_find_unused_parameters_true");
    assert_has(msg, "fsdp");
    msg = load_error("trainer:\n  precision: 16\n");
    assert_has(msg, "trainer.precision: '16' is not supported");
    assert_has(msg, "16-mixed");
    assert_has(msg, "bf16-mixed");

    esp_config *cfg;
    const training_cfg *t = must_load("trainer:\n  precision: 32\n  strategy: fsdp\nparallel:\n  env: local_gpu\n", &cfg);
    cr_assert_str_eq(t->trainer->precision, "32");
    cr_assert_str_eq(t->trainer->strategy, "fsdp");
    cr_assert_str_eq(t->parallel->env, "local_gpu");
    config_free(cfg);
}

Test(config, targets)
{
    esp_config *cfg;
    const training_cfg *t = must_load("optimizer:\n  _target_: torch.optim.AdamW\n  lr: 0.001\n"
                                      "scheduler:\n  _target_: espnet2.schedulers.warmup_lr.WarmupLR\n"
                                      "  warmup_steps: 10\n",
                                      &cfg);
    cr_assert_str_eq(t->optimizer->target, "torch.optim.AdamW");
    cr_assert_str_eq(t->scheduler->target, "espnet2.schedulers.warmup_lr.WarmupLR");
    config_free(cfg);

    const char *msg = load_error("optimizer:\n  _target_: torch.optim.RMSprop\n");
    assert_has(msg, "%s:2:13: optimizer._target_: unknown _target_ 'torch.optim.RMSprop'", tpath("cfg.yaml"));
    assert_has(msg, "torch.optim.Adam");
    assert_has(msg, "torch.optim.AdamW");
    assert_has(msg, "torch.optim.SGD");
    assert_has(msg, "torch.optim.Adadelta");
    msg = load_error("trainer:\n  logger:\n    - _target_: lightning.pytorch.loggers.WandbLogger\n");
    assert_has(msg, "trainer.logger[0]._target_: unknown _target_");
    assert_has(msg, "TensorBoardLogger");

    cr_assert_not_null(target_lookup("optimizer", "torch.optim.Adam"));
    cr_assert_not_null(target_lookup("optimizer", "torch.optim.SGD"));
    cr_assert_null(target_lookup("optimizer", "torch.optim.RMSprop"));
    cr_assert_not_null(
        target_lookup("dataloader.train.iter_factory", "espnet2.iterators.sequence_iter_factory.SequenceIterFactory"));
}

/* ---- the ESPnet3 documentation's YAML blocks ------------------------------------------------ */

Test(config, docs_trainer_block)
{
    esp_config *cfg;
    const training_cfg *t = must_load("exp_dir: exp/run\n"
                                      "trainer:\n"
                                      "  accelerator: gpu\n"
                                      "  devices: 4\n"
                                      "  num_nodes: 2\n"
                                      "  strategy: ddp\n"
                                      "  precision: 16-mixed\n"
                                      "  gradient_clip_val: 1.0\n"
                                      "  log_every_n_steps: 200\n"
                                      "  logger:\n"
                                      "    - _target_: lightning.pytorch.loggers.TensorBoardLogger\n"
                                      "      save_dir: ${exp_dir}/tensorboard\n"
                                      "      name: tb_logger\n",
                                      &cfg);
    const trainer_cfg *tr = t->trainer;
    cr_assert_str_eq(tr->accelerator, "gpu");
    cr_assert_eq(tr->devices, 4);
    cr_assert_eq(tr->num_nodes, 2);
    cr_assert_str_eq(tr->strategy, "ddp");
    cr_assert_str_eq(tr->precision, "16-mixed");
    cr_assert_float_eq(tr->gradient_clip_val, 1.0, 1e-12);
    cr_assert_eq(tr->log_every_n_steps, 200);
    cr_assert_eq(tr->n_logger, 1);
    cr_assert_str_eq(tr->logger[0].save_dir, "exp/run/tensorboard");
    cr_assert_str_eq(tr->logger[0].name, "tb_logger");
    config_free(cfg);
}

Test(config, docs_parallel_slurm_block)
{
    esp_config *cfg;
    const training_cfg *t = must_load("parallel:\n"
                                      "  env: slurm\n"
                                      "  n_workers: 40\n"
                                      "  options:\n"
                                      "    account: x\n"
                                      "    queue: cpu\n"
                                      "    cores: 1\n"
                                      "    processes: 4\n"
                                      "    memory: 40GB\n"
                                      "    death_timeout: 240\n"
                                      "    walltime: \"30:00\"\n"
                                      "    job_extra_directives:\n"
                                      "      - \"--time 24:00:00\"\n"
                                      "      - \"--ntasks-per-node=1\"\n"
                                      "      - \"--cpus-per-task=8\"\n"
                                      "      - \"--output=parallel_log/%j-%x.log\"\n",
                                      &cfg);
    const parallel_cfg *p = t->parallel;
    cr_assert_str_eq(p->env, "slurm");
    cr_assert_eq(p->n_workers, 40);
    cr_assert_str_eq(p->options->account, "x");
    cr_assert_str_eq(p->options->queue, "cpu");
    cr_assert_eq(p->options->cores, 1);
    cr_assert_eq(p->options->processes, 4);
    cr_assert_str_eq(p->options->memory, "40GB");
    cr_assert_eq(p->options->death_timeout, 240);
    cr_assert_str_eq(p->options->walltime, "30:00");
    cr_assert_eq(p->options->n_job_extra_directives, 4);
    cr_assert_str_eq(p->options->job_extra_directives[0], "--time 24:00:00");
    cr_assert_str_eq(p->options->job_extra_directives[3], "--output=parallel_log/%j-%x.log");
    config_free(cfg);
}

Test(config, docs_parallel_local_gpu_block)
{
    esp_config *cfg;
    const training_cfg *t = must_load("parallel:\n  env: local_gpu\n  n_workers: 4\n", &cfg);
    cr_assert_str_eq(t->parallel->env, "local_gpu");
    cr_assert_eq(t->parallel->n_workers, 4);
    cr_assert_null(t->parallel->options);
    config_free(cfg);
}

Test(config, docs_dataloader_block)
{
    esp_config *cfg;
    const training_cfg *t = must_load("stats_dir: exp/stats\n"
                                      "dataloader:\n"
                                      "  collate_fn:\n"
                                      "    _target_: espnet2.train.collate_fn.CommonCollateFn\n"
                                      "    int_pad_value: -1\n"
                                      "  train:\n"
                                      "    total_shards: 8\n"
                                      "    dist_world_size: 4\n"
                                      "    multiple_iterator: true\n"
                                      "    num_shards: 2\n"
                                      "    iter_factory:\n"
                                      "      _target_: espnet2.iterators.sequence_iter_factory.SequenceIterFactory\n"
                                      "      shuffle: true\n"
                                      "      collate_fn: ${dataloader.collate_fn}\n"
                                      "      batches:\n"
                                      "        type: numel\n"
                                      "        shape_files:\n"
                                      "          - ${stats_dir}/train/feats_shape\n"
                                      "        batch_size: 16\n"
                                      "        batch_bins: 4000000\n"
                                      "  valid:\n"
                                      "    multiple_iterator: false\n"
                                      "    num_shards: 1\n"
                                      "    iter_factory:\n"
                                      "      _target_: espnet2.iterators.sequence_iter_factory.SequenceIterFactory\n"
                                      "      shuffle: false\n"
                                      "      collate_fn: ${dataloader.collate_fn}\n"
                                      "      batches:\n"
                                      "        type: numel\n"
                                      "        shape_files:\n"
                                      "          - ${stats_dir}/valid/feats_shape\n"
                                      "        batch_size: ${dataloader.train.iter_factory.batches.batch_size}\n"
                                      "        batch_bins: 4000000\n",
                                      &cfg);
    const loader_split_cfg *tr = t->dataloader->train;
    cr_assert_eq(tr->total_shards, 8);
    cr_assert_eq(tr->dist_world_size, 4);
    cr_assert_eq(tr->multiple_iterator, 1);
    cr_assert_eq(tr->num_shards, 2);
    cr_assert_str_eq(tr->iter_factory->target, "espnet2.iterators.sequence_iter_factory.SequenceIterFactory");
    cr_assert_eq(tr->iter_factory->shuffle, 1);
    cr_assert_str_eq(tr->iter_factory->collate_fn->target, "espnet2.train.collate_fn.CommonCollateFn");
    cr_assert_eq(tr->iter_factory->collate_fn->int_pad_value, -1);
    cr_assert_str_eq(tr->iter_factory->batches->type, "numel");
    cr_assert_eq(tr->iter_factory->batches->n_shape_files, 1);
    cr_assert_str_eq(tr->iter_factory->batches->shape_files[0], "exp/stats/train/feats_shape");
    cr_assert_eq(tr->iter_factory->batches->batch_size, 16);
    cr_assert_eq(tr->iter_factory->batches->batch_bins, 4000000);
    const loader_split_cfg *va = t->dataloader->valid;
    cr_assert_eq(va->multiple_iterator, 0);
    cr_assert_eq(va->iter_factory->shuffle, 0);
    cr_assert_eq(va->iter_factory->batches->batch_size, 16);
    cr_assert_str_eq(va->iter_factory->batches->shape_files[0], "exp/stats/valid/feats_shape");
    config_free(cfg);
}

Test(config, docs_num_device_block)
{
    esp_config *cfg;
    const training_cfg *t = must_load("num_device: 4\nnum_nodes: 1\n"
                                      "trainer:\n  devices: ${num_device}\n  num_nodes: ${num_nodes}\n  strategy: ddp\n",
                                      &cfg);
    cr_assert_eq(t->num_device, 4);
    cr_assert_eq(t->num_nodes, 1);
    cr_assert_eq(t->trainer->devices, 4);
    cr_assert_eq(t->trainer->num_nodes, 1);
    cr_assert_str_eq(t->trainer->strategy, "ddp");
    config_free(cfg);
}
