/* The value rules of the configs that belong to one key: the ranges of numbers (num_rules), the
 * declared defaults of left-out keys (key_defaults, and the defaults by class or switch written
 * into their blocks), and the number readers; see config_values.h. The rules between keys are
 * core/config/config_rules.c's. */
#include "core/config/config_values.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_schema.h"
#include "core/config/config_task.h"
#include "core/config/config_values_internal.h"

/* ---- ranges of numbers --------------------------------------------------------------------- */

#define INF HUGE_VAL
#define DROPOUT(p) {p, 0, 1, HI_OPEN, "in [0, 1)", "0: no dropout"}
/* A key of the transducer search, which asr_inference's Speech2Text reads from model.transducer_conf
 * and asr_transducer_inference's from model.beam_search_config: one range for both blocks, each
 * with its own default (the two classes' defaults differ: max_sym_exp, nstep). */
#define TRANSDUCER_SEARCH(key, lo, hi, need, def_asr, def_asr_transducer)                                \
    {"model.transducer_conf." key, lo, hi, 0, need, "leave it out for " STRINGIFY(def_asr)},             \
        {"model.beam_search_config." key, lo, hi, 0, need, "leave it out for " STRINGIFY(def_asr_transducer)}
#define STRINGIFY(x) STRINGIFY_(x)
#define STRINGIFY_(x) #x

static const config_range num_rules[] = {
    /* training: top level */
    {"num_device", 1, INF, 0, ">= 1", "devices per node, passed on by ${num_device}; leave it out for 1"},
    {"num_nodes", 1, INF, 0, ">= 1", "leave it out for 1"},
    {"seed", 0, 4294967295.0, 0, "in [0, 4294967295]", "numpy's RandomState, which orders the batches, takes 32-bit seeds"},
    /* create_dataset: a recipe's keys are in its own table (core/config/config_recipe.h) */
    /* tokenizer */
    {"tokenizer.vocab_size", 1, INF, 0, ">= 1", "leave it out for the size the text gives"},
    {"tokenizer.character_coverage", 0, 1, LO_OPEN, "in (0, 1]", "the fraction of characters the model covers"},
    /* trainer (Lightning's Trainer arguments) */
    {"trainer.devices", 1, INF, 0, ">= 1",
     "devices per node: write the count (Lightning's -1, all devices, is not supported)"},
    {"trainer.num_nodes", 1, INF, 0, ">= 1", NULL},
    {"trainer.gradient_clip_val", 0, INF, 0, ">= 0", "0 or null: no clipping"},
    {"trainer.accumulate_grad_batches", 1, INF, 0, ">= 1", "1: one optimizer step per batch"},
    {"trainer.max_epochs", 1, INF, MINUS_ONE, "-1 (no limit) or >= 1", "leave it out or null for Lightning's 1000"},
    {"trainer.max_steps", 1, INF, MINUS_ONE, "-1 (no limit) or >= 1", "-1: no step limit"},
    {"trainer.log_every_n_steps", 1, INF, 0, ">= 1", "optimizer steps between two logged losses"},
    {"trainer.check_val_every_n_epoch", 1, INF, 0, ">= 1",
     "leave it out for 1; null: trainer.val_check_interval batches counted over epochs"},
    {"trainer.limit_train_batches", 0, INF, LO_OPEN | COUNT_OR_FRACTION | INT_ONE_OK,
     "a fraction in (0, 1] or a number of batches >= 1", "leave it out or write 1.0 for all batches"},
    {"trainer.limit_val_batches", 0, INF, LO_OPEN | COUNT_OR_FRACTION | INT_ONE_OK,
     "a fraction in (0, 1] or a number of batches >= 1",
     "leave it out or write 1.0 for all batches; 0 (no validation) is not supported"},
    {"trainer.val_check_interval", 0, INF, LO_OPEN | COUNT_OR_FRACTION | INT_ONE_OK,
     "a fraction of an epoch in (0, 1] or a number of batches >= 1", "leave it out or write 1.0 for once per epoch"},
    {"trainer.num_sanity_val_steps", -1, INF, 0, ">= -1", "-1: all validation batches, 0: none"},
    {"trainer.min_epochs", 0, INF, 0, ">= 0", "EarlyStopping does not stop before it"},
    {"trainer.min_steps", 0, INF, 0, ">= 0", "EarlyStopping does not stop before it"},
    {"trainer.dist_timeout", 0, INF, LO_OPEN, "> 0 seconds", "how long any wait for another rank may take"},
    /* parallel (all three kinds) */
    {"parallel.n_workers", 1, CFG_MAX_WORKERS, 0, "in [1, 4096]",
     "worker processes or SLURM jobs; env local_gpu: one per GPU when left out"},
    {"parallel.options.cores", 1, INF, 0, ">= 1", "CPU cores per SLURM job"},
    {"parallel.options.processes", 1, INF, 0, ">= 1", "worker processes per SLURM job; leave it out for 1"},
    {"parallel.options.death_timeout", 1, INF, 0, ">= 1 seconds", "leave it out: it has no effect here"},
    /* dataloader */
    {"dataloader.*.num_shards", 1, INF, 0, ">= 1", "leave it out for 1"},
    {"dataloader.*.total_shards", 1, INF, 0, ">= 1", "leave it out or null for no sharding"},
    {"dataloader.*.dist_world_size", 1, INF, 0, ">= 1", "the number of ranks the shards are made for"},
    {"dataloader.*.iter_factory.num_workers", 0, INF, 0, ">= 0", "0: data are loaded in the training process"},
    {"dataloader.*.iter_factory.batches.batch_size", 1, INF, 0, ">= 1", "utterances per batch (types sorted, unsorted)"},
    {"dataloader.*.iter_factory.batches.batch_bins", 1, INF, 0, ">= 1",
     "feature values per batch (types numel, length), e.g. 1000000"},
    /* dataset.preprocessor: ESPnet2's CommonPreprocessor augmentation. data_aug_effects' entries
     * ([weight, effect, {arguments}], also inside a group) are parsed at load by
     * core/config/config_aug.c through config_read_number, under the paths data_aug_effects[].weight
     * and data_aug_effects[].<argument>; each argument has one range whichever effect takes it. */
    {"dataset.preprocessor.data_aug_prob", 0, 1, 0, "in [0, 1]", "the share of utterances augmented"},
    {"dataset.preprocessor.data_aug_num[]", 0, CFG_MAX_AUG_ENTRIES, INTEGER, "an integer in [0, 64]",
     "effects per utterance, [min, max]"},
    {"dataset.preprocessor.data_aug_effects[].weight", 0, 1e6, LO_OPEN, "in (0, 1e+06]", "an entry's weight"},
    {"dataset.preprocessor.data_aug_effects[].cutoff_freq", 0, 1e6, LO_OPEN, "in (0, 1e+06] Hz", NULL},
    {"dataset.preprocessor.data_aug_effects[].center_freq", 0, 1e6, LO_OPEN, "in (0, 1e+06] Hz", NULL},
    {"dataset.preprocessor.data_aug_effects[].Q", 0, 100, LO_OPEN, "in (0, 100]", "0.707: Butterworth"},
    {"dataset.preprocessor.data_aug_effects[].gain", -60, 60, 0, "in [-60, 60] dB", NULL},
    {"dataset.preprocessor.data_aug_effects[].enhancement_amount", 0, 100, 0, "in [0, 100]", NULL},
    {"dataset.preprocessor.data_aug_effects[].factor", 0.5, 2, 0, "in [0.5, 2]", "a speed or time factor"},
    {"dataset.preprocessor.data_aug_effects[].n_fft", 0.001, 0.5, 0, "in [0.001, 0.5] seconds", NULL},
    {"dataset.preprocessor.data_aug_effects[].win_length", 1, 1e5, INTEGER, "an integer in [1, 100000]",
     "ESPnet uses it as a number of samples"},
    {"dataset.preprocessor.data_aug_effects[].hop_length", 0.0005, 0.5, 0, "in [0.0005, 0.5] seconds", NULL},
    {"dataset.preprocessor.data_aug_effects[].n_steps", -24, 24, 0, "in [-24, 24]", "semitones (bins)"},
    {"dataset.preprocessor.data_aug_effects[].bins_per_octave", 1, 96, 0, "in [1, 96]", NULL},
    {"dataset.preprocessor.data_aug_effects[].scale", 0, 10, 0, "in [0, 10]", NULL},
    {"dataset.preprocessor.data_aug_effects[].coeff", 0, 1, 0, "in [0, 1]", NULL},
    {"dataset.preprocessor.data_aug_effects[].min_quantile", 0, 1, 0, "in [0, 1]", NULL},
    {"dataset.preprocessor.data_aug_effects[].max_quantile", 0, 1, 0, "in [0, 1]", NULL},
    {"dataset.preprocessor.rir_apply_prob", 0, 1, 0, "in [0, 1]", "the share of utterances reverberated"},
    {"dataset.preprocessor.noise_apply_prob", 0, 1, 0, "in [0, 1]", "the share of utterances with noise added"},
    {"dataset.preprocessor.short_noise_thres", 0, 1, 0, "in [0, 1]", "accepted; ESPnet only warns with it"},
    {"speed_perturb_factors[]", 0.5, 2, 0, "in [0.5, 2]", "ESPnet2 asr.sh's speed copies, e.g. [0.9, 1.0, 1.1]"},
    /* model (training). Widths, heads and depths are bounded far past any ESPnet model (OWSM v3.1:
     * 1024 wide, 27 blocks) so that sizes stay exact in the int fields they go to; the parameter
     * count the sizes give together is checked too (model_dims_check_size). */
    {"model.vocab_size", 1, INF, 0, ">= 1", "leave it out: the token list gives the size"},
    {"model.frontend_conf.fs", 1, INF, 0, "a sample rate >= 1 Hz", "leave it out for 16000"},
    {"model.frontend_conf.n_fft", 2, 65536, EVEN, "even and in [2, 65536]", "leave it out for 512"},
    {"model.frontend_conf.win_length", 1, INF, 0, ">= 1", "leave it out for n_fft"},
    {"model.frontend_conf.hop_length", 1, INF, 0, ">= 1", "leave it out for 128"},
    {"model.frontend_conf.n_mels", 1, 4096, 0, "in [1, 4096]", "leave it out for 80"},
    {"model.frontend_conf.fmin", 0, INF, 0, ">= 0 Hz", "leave it out for 0"},
    {"model.frontend_conf.fmax", 0, INF, LO_OPEN, "> 0 Hz", "leave it out or null for fs/2"},
    {"model.normalize_conf.eps", 0, INF, LO_OPEN, "> 0", "the least standard deviation"},
    {"model.specaug_conf.time_warp_window", 1, 100000, 0, "in [1, 100000]",
     "apply_time_warp: false turns warping off; leave it out for 5"},
    {"model.specaug_conf.num_freq_mask", 1, 1000, 0, "in [1, 1000]",
     "apply_freq_mask: false turns frequency masks off; leave it out for 2"},
    {"model.specaug_conf.num_time_mask", 1, 1000, 0, "in [1, 1000]",
     "apply_time_mask: false turns time masks off; leave it out for 2"},
    {"model.specaug_conf.freq_mask_width_range[]", 0, 1000000, 0, "in [0, 1000000]", "widths in frequency bins"},
    {"model.specaug_conf.time_mask_width_range[]", 0, 1000000, 0, "in [0, 1000000]", "widths in frames"},
    {"model.specaug_conf.time_mask_width_ratio_range[]", 0, 1, 0, "in [0, 1]", "fractions of the utterance length"},
    {"model.preencoder_conf.input_size", 1, 4096, 0, "in [1, 4096]", "n_mels; leave it out to take it from the features"},
    {"model.preencoder_conf.output_size", 1, 65536, 0, "in [1, 65536]", "the width linear projects the features to"},
    {"model.encoder_conf.output_size", 1, 65536, 0, "in [1, 65536]", "leave it out for 256"},
    {"model.encoder_conf.attention_heads", 1, 1024, 0, "in [1, 1024]", "leave it out for 4"},
    {"model.encoder_conf.linear_units", 1, 262144, 0, "in [1, 262144]", "leave it out for 2048"},
    {"model.encoder_conf.num_blocks", 1, 1024, 0, "in [1, 1024]", "leave it out for 6 (e_branchformer: 12)"},
    {"model.encoder_conf.cgmlp_linear_units", 2, 262144, EVEN, "even and in [2, 262144]", "the gating unit splits it in halves; "
     "leave it out for 2048"},
    {"model.encoder_conf.layer_drop_rate", 0, 1, 0, "in [0, 1]", "0: every block runs"},
    {"model.encoder_conf.block_size", 1, 100000, 0, "in [1, 100000]", "frames per block after subsampling; leave it out "
     "for 40"},
    {"model.encoder_conf.hop_size", 1, 100000, 0, "in [1, 100000]", "leave it out for 16"},
    {"model.encoder_conf.look_ahead", 0, 100000, 0, "in [0, 100000]", "leave it out for 16"},
    DROPOUT("model.encoder_conf.dropout_rate"),
    DROPOUT("model.encoder_conf.positional_dropout_rate"),
    DROPOUT("model.encoder_conf.attention_dropout_rate"),
    DROPOUT("model.ctc_conf.dropout_rate"),
    {"model.decoder_conf.attention_heads", 1, 1024, 0, "in [1, 1024]", "leave it out for 4"},
    {"model.decoder_conf.linear_units", 1, 262144, 0, "in [1, 262144]", "leave it out for 2048"},
    {"model.decoder_conf.num_blocks", 1, 1024, 0, "in [1, 1024]", "leave it out for 6"},
    DROPOUT("model.decoder_conf.dropout_rate"),
    DROPOUT("model.decoder_conf.positional_dropout_rate"),
    DROPOUT("model.decoder_conf.self_attention_dropout_rate"),
    DROPOUT("model.decoder_conf.src_attention_dropout_rate"),
    {"model.decoder_conf.num_layers", 1, 1024, 0, "in [1, 1024]", "leave it out for 1"},
    {"model.decoder_conf.hidden_size", 1, 65536, 0, "in [1, 65536]", "leave it out for 320"},
    DROPOUT("model.decoder_conf.dropout"),
    DROPOUT("model.decoder_conf.dropout_embed"),
    {"model.joint_net_conf.joint_space_size", 1, 65536, 0, "in [1, 65536]", "leave it out for 256"},
    {"model.model_conf.ctc_weight", 0, 1, 0, "in [0, 1]", "1.0 for a CTC-only model"},
    {"model.lm_conf.embed_unit", 1, 65536, 0, "in [1, 65536]", "leave it out for 128"},
    {"model.lm_conf.att_unit", 1, 65536, 0, "in [1, 65536]", "leave it out for 256"},
    {"model.lm_conf.head", 1, 1024, 0, "in [1, 1024]", "leave it out for 2"},
    {"model.lm_conf.unit", 1, 262144, 0, "in [1, 262144]", "leave it out for 1024 (transformer) or 650 (seq_rnn)"},
    {"model.lm_conf.layer", 1, 1024, 0, "in [1, 1024]", "leave it out for 4"},
    {"model.lm_conf.nhid", 1, 262144, 0, "in [1, 262144]", "leave it out for unit"},
    {"model.lm_conf.nlayers", 1, 1024, 0, "in [1, 1024]", "leave it out for 2"},
    DROPOUT("model.lm_conf.dropout_rate"),
    DROPOUT("model.lm_conf.positional_dropout_rate"),
    DROPOUT("model.lm_conf.attention_dropout_rate"),
    {"model.model_conf.validation_nstep", 1, 1024, 0, "in [1, 1024]", "leave it out for 2"},
    {"model.model_conf.lsm_weight", 0, 1, HI_OPEN, "in [0, 1)", "0: no label smoothing"},
    {"model.model_conf.interctc_weight", 0, 1, HI_OPEN, "in [0, 1)", "0: no intermediate CTC loss; ESPnet2 asserts the same"},
    /* optimizer and scheduler */
    {"optimizer.lr", 0, INF, LO_OPEN, "> 0", "leave it out for torch's default: 0.001, Adadelta's 1.0"},
    {"optimizer.betas[]", 0, 1, HI_OPEN, "in [0, 1)", "torch checks the same"},
    {"optimizer.eps", 0, INF, LO_OPEN, "> 0", "leave it out for torch's default: 1e-8, Adadelta's 1e-6"},
    {"optimizer.weight_decay", 0, INF, 0, ">= 0", "0: no weight decay"},
    /* scheduler: each key's range over the classes that take it; a class's own limits (WarmupLR's
     * warmup_steps >= 1, ReduceLROnPlateau's factor < 1, ...) are core/train/scheduler.c's, at the key */
    {"scheduler.warmup_steps", 0, INF, 0, ">= 0", "warmup steps; leave it out for the class's default"},
    {"scheduler.factor", 0, 1, 0, "in [0, 1]", "ConstantLR's factor (1/3) or ReduceLROnPlateau's (0.1)"},
    {"scheduler.total_iters", 0, INF, 0, ">= 0", "ConstantLR's / LinearLR's / PolynomialLR's steps; leave it out for 5"},
    {"scheduler.step_size", 1, INF, 0, ">= 1", "StepLR's period in scheduler steps, WarmupStepLR's in epochs"},
    {"scheduler.gamma", 0, INF, LO_OPEN, "> 0", "the factor per period"},
    {"scheduler.start_factor", 0, 1, LO_OPEN, "in (0, 1]", "LinearLR's first factor; torch checks the same"},
    {"scheduler.end_factor", 0, 1, 0, "in [0, 1]", "LinearLR's last factor; torch checks the same"},
    {"scheduler.T_max", 1, INF, 0, ">= 1", "CosineAnnealingLR's half period in scheduler steps"},
    {"scheduler.eta_min", 0, INF, 0, ">= 0", "the cosine's floor; leave it out for 0"},
    {"scheduler.model_size", 0, INF, LO_OPEN, "> 0", "NoamLR's d_model; leave it out for 320"},
    {"scheduler.milestones[]", 0, INF, 0, ">= 0", "MultiStepLR's scheduler steps where the lr is multiplied by gamma"},
    {"scheduler.power", 0, INF, 0, ">= 0", "PolynomialLR's power (torch divides by zero for a negative one); "
                                         "leave it out for 1.0"},
    {"scheduler.T_0", 1, INF, 0, ">= 1", "CosineAnnealingWarmRestarts' first period in scheduler steps; torch checks "
                                        "the same"},
    {"scheduler.T_mult", 1, INF, 0, ">= 1", "the period's factor after each restart; torch checks the same"},
    {"scheduler.patience", 0, INF, 0, ">= 0", "validations without improvement before the lr drops; leave it out "
                                             "for 10"},
    {"scheduler.threshold", 0, INF, 0, ">= 0", "the least improvement that counts; leave it out for 1e-4"},
    {"scheduler.cooldown", 0, INF, 0, ">= 0", "validations after a drop that count no bad ones; leave it out for 0"},
    {"scheduler.min_lr", 0, INF, 0, ">= 0", "the least lr"},
    {"scheduler.eps", 0, INF, 0, ">= 0", "ReduceLROnPlateau's least change of the lr; leave it out for 1e-8"},
    {"scheduler.max_lr", 0, INF, LO_OPEN, "> 0", "the peak lr"},
    {"scheduler.total_steps", 1, INF, 0, ">= 1", "the scheduler steps of the whole schedule"},
    {"scheduler.epochs", 1, INF, 0, ">= 1", "OneCycleLR's epochs (with steps_per_epoch, instead of total_steps)"},
    {"scheduler.steps_per_epoch", 1, INF, 0, ">= 1", "optimizer steps per epoch"},
    {"scheduler.pct_start", 0, 1, 0, "in [0, 1]", "OneCycleLR's share of steps rising to max_lr; torch checks the "
                                                 "same; leave it out for 0.3"},
    {"scheduler.base_momentum", 0, 1, HI_OPEN, "in [0, 1)", "OneCycleLR's lowest beta1; leave it out for 0.85"},
    {"scheduler.max_momentum", 0, 1, HI_OPEN, "in [0, 1)", "OneCycleLR's highest beta1; leave it out for 0.95"},
    {"scheduler.div_factor", 0, INF, LO_OPEN, "> 0", "OneCycleLR's initial lr is max_lr / div_factor; leave it "
                                                    "out for 25"},
    {"scheduler.final_div_factor", 0, INF, LO_OPEN, "> 0", "OneCycleLR's last lr is the initial lr / "
                                                          "final_div_factor; leave it out for 1e4"},
    {"scheduler.warmup_steps_list[]", 0, INF, 0, ">= 0", "PiecewiseLinearWarmupLR's steps"},
    {"scheduler.warmup_lr_list[]", 0, INF, 0, ">= 0", "PiecewiseLinearWarmupLR's lr at each step"},
    {"scheduler.first_cycle_steps", 1, INF, 0, ">= 1", "CosineAnnealingWarmupRestarts' first cycle in scheduler "
                                                      "steps"},
    {"scheduler.cycle_mult", 1, INF, 0, ">= 1", "the cycle's factor after each restart (below 1 the cycles shrink "
                                               "to no steps, where ESPnet2 divides by zero); leave it out for 1.0"},
    {"scheduler.max_steps", 1, INF, 0, ">= 1", "TristageLR's steps; leave it out for 25000"},
    {"scheduler.warmup_ratio", 0, 1, 0, "in [0, 1]", "TristageLR's share of warmup steps"},
    {"scheduler.hold_ratio", 0, 1, 0, "in [0, 1]", "TristageLR's share of steps at the peak"},
    {"scheduler.decay_ratio", 0, 1, 0, "in [0, 1]", "TristageLR's share of decay steps"},
    {"scheduler.init_lr_scale", 0, 1, LO_OPEN, "in (0, 1]", "TristageLR's first lr / the optimizer's; ESPnet2 "
                                                           "asserts the same"},
    {"scheduler.final_lr_scale", 0, 1, LO_OPEN, "in (0, 1]", "TristageLR's last lr / the optimizer's; ESPnet2 "
                                                            "asserts the same"},
    {"best_model_criterion[].nbest", 1, INF, 0, ">= 1", "how many best checkpoints to average"},
    /* inference: model is Speech2Text's arguments */
    {"model.beam_size", 1, 10000, 0, "in [1, 10000]", "1: greedy CTC"},
    {"model.batch_size", 1, 4096, 0, "in [1, 4096]", "utterances decoded together (one padded encoder pass, one "
                                                     "beam search over all their hypotheses)"},
    {"model.nbest", 1, 1000, 0, "in [1, 1000]", NULL},
    {"model.decoding_window", 1, 3600000, 0, "in [1, 3600000]", "the audio of each streaming piece, in ms"},
    {"batch_size", 1, 4096, 0, "in [1, 4096]", "utterances per model call (ESPnet3's form of model.batch_size); null: "
                                               "one at a time"},
    {"model.ctc_weight", 0, 1, 0, "in [0, 1]", "1.0 for a CTC-only model"},
    {"model.lm_weight", 0, INF, 0, ">= 0", "0: no language model"},
    TRANSDUCER_SEARCH("max_sym_exp", 1, 1000, "in [1, 1000]", TS_DEF_MAX_SYM_EXP, TS_DEF_AT_MAX_SYM_EXP),
    TRANSDUCER_SEARCH("u_max", 0, 100000, "in [0, 100000]", TS_DEF_U_MAX, TS_DEF_U_MAX),
    TRANSDUCER_SEARCH("nstep", 1, 1000, "in [1, 1000]", TS_DEF_NSTEP, TS_DEF_AT_NSTEP),
    TRANSDUCER_SEARCH("expansion_gamma", 0, INF, ">= 0", TS_DEF_EXPANSION_GAMMA, TS_DEF_EXPANSION_GAMMA),
    TRANSDUCER_SEARCH("expansion_beta", 0, 100000, "in [0, 100000]", TS_DEF_EXPANSION_BETA, TS_DEF_EXPANSION_BETA),
    /* transducer_conf's own (beam_search_config refuses them: core/config/config_rules.c) */
    {"model.transducer_conf.prefix_alpha", 0, 100000, 0, "in [0, 100000]",
     "leave it out for " STRINGIFY(TS_DEF_PREFIX_ALPHA)},
    {"model.transducer_conf.nbest", 1, 1000, 0, "in [1, 1000]", "leave it out for " STRINGIFY(TS_DEF_NBEST)},
    {"longform.window", 0, 3600, LO_OPEN, "in (0, 3600] seconds", "seconds per window"},
    {"longform.overlap", 0, 1800, LO_OPEN, "in (0, 1800] seconds", "seconds neighbouring windows share, at most "
                                                                   "half the window"},
    {"longform.threshold", 0, INF, 0, ">= 0 seconds", "items longer than this are decoded in windows"},
};

static int in_range(const config_range *r, const ynode *n, double v)
{
    if ((r->flags & MINUS_ONE) && v == -1) return 1;
    if (v < r->lo || v > r->hi || ((r->flags & LO_OPEN) && v == r->lo) || ((r->flags & HI_OPEN) && v == r->hi))
        return 0;
    if ((r->flags & EVEN) && fmod(v, 2) != 0) return 0;
    if ((r->flags & INTEGER) && v != floor(v)) return 0;
    if (r->flags & COUNT_OR_FRACTION) {
        int written_int = yt_as_int(n, NULL);
        if (written_int && v == 1 && !(r->flags & INT_ONE_OK)) return 0; /* one batch or all? */
        if (v > 1 && v != floor(v)) return 0; /* a fraction above 1 */
    }
    return 1;
}

int config_check_range(const config_range *rules, size_t n_rules, const ynode *n, const char *schema_path,
                       const char *path, double v, esp_err *err)
{
    for (size_t i = 0; i < n_rules; i++) {
        const config_range *r = &rules[i];
        if (!config_path_match(r->path, schema_path) || in_range(r, n, v)) continue;
        if ((r->flags & COUNT_OR_FRACTION) && v == 1)
            return config_fail_node(err, n, path,
                                    "must be %s, got the integer 1 (Lightning reads it as one batch, espnet3 would "
                                    "read it as all: write 1.0 for all batches, or a count >= 2)",
                                    r->need);
        const char *def = config_default_value(schema_path);
        if (def)
            return config_fail_node(err, n, path, "must be %s, got %s (%s%sleave it out for %s)", r->need, n->str,
                                    r->hint ? r->hint : "", r->hint ? "; " : "", def);
        if (r->hint) return config_fail_node(err, n, path, "must be %s, got %s (%s)", r->need, n->str, r->hint);
        return config_fail_node(err, n, path, "must be %s, got %s", r->need, n->str);
    }
    return 0;
}

int config_check_number(const ynode *n, const char *schema_path, const char *path, double v, esp_err *err)
{
    return config_check_range(num_rules, sizeof num_rules / sizeof *num_rules, n, schema_path, path, v, err);
}

int config_read_number(const ynode *n, const char *schema_path, const char *path, double *out, esp_err *err)
{
    double v;
    if (n->kind != YN_SCALAR || n->quoted || !yt_as_float(n, &v))
        return config_fail_node(err, n, path, "expected a number, got %s '%s'", yt_kind_name(n),
                                n->kind == YN_SCALAR ? n->str : "...");
    if (!isfinite(v)) return config_fail_node(err, n, path, "expected a finite number, got '%s'", n->str);
    if (config_check_number(n, schema_path, path, v, err) != 0) return -1;
    *out = v;
    return 0;
}

/* noise_db_range's bound: an SNR far past any recording's */
#define MAX_DB 100.0

/* "low_high" or "v" as two numbers within MAX_DB (in either order); 0 when s is neither. */
static int db_numbers(const char *s, double *a, double *b)
{
    char *end;
    errno = 0;
    *a = strtod(s, &end), *b = *a;
    int ok = end != s && errno == 0;
    if (ok && *end == '_') {
        const char *s2 = end + 1;
        *b = strtod(s2, &end);
        ok = end != s2 && errno == 0;
    }
    return ok && *end == '\0' && isfinite(*a) && isfinite(*b) && fabs(*a) <= MAX_DB && fabs(*b) <= MAX_DB;
}

int config_db_range_of(const char *s, double *lo, double *hi)
{
    return db_numbers(s, lo, hi) && *lo <= *hi;
}

int config_db_range(const ynode *n, const char *path, double *lo, double *hi, esp_err *err)
{
    double a, b;
    if (n->kind == YN_SCALAR && db_numbers(n->str, &a, &b)) {
        if (a > b)
            return config_fail_node(err, n, path, "'%s': low %g is above high %g (write \"low_high\")", n->str, a, b);
        *lo = a, *hi = b;
        return 0;
    }
    return config_fail_node(err, n, path, "expected \"low_high\" in dB within +-%g, e.g. \"3_10\" (got %s '%s')",
                            MAX_DB, yt_kind_name(n), n->kind == YN_SCALAR ? n->str : "...");
}

/* ---- what a left-out key means ------------------------------------------------------------- */

/* The default of each key that has one, per config kind: the value a key left out (or null) takes,
 * written into the tree the typed view is loaded from (config.c) and shown by --show_config, but
 * not into the resolved config.yaml, which keeps what the user wrote. A default is written into
 * its block when the block is there; CONFIG_MAKE_BLOCK writes the block too (Lightning's Trainer()
 * takes all its defaults), and `when` makes it depend on another key. A range rule above appends
 * "leave it out for <value>" to its hint; every value is in its key's range (test
 * config_values/defaults_are_in_range). A recipe declares the defaults of its own keys
 * (core/config/config_recipe.h). */
static const config_default key_defaults[] = {
    {CONFIG_TRAINING, "trainer.devices", "1", CONFIG_MAKE_BLOCK, NULL},
    {CONFIG_TRAINING, "trainer.num_nodes", "1", CONFIG_MAKE_BLOCK, NULL},
    /* lightning_max_epochs writes max_epochs into a trainer block; a config without one gets 1000 */
    {CONFIG_TRAINING, "trainer.max_epochs", "1000", CONFIG_MAKE_BLOCK, NULL},
    {CONFIG_TRAINING, "trainer.max_steps", "-1", CONFIG_MAKE_BLOCK, NULL},
    {CONFIG_TRAINING, "trainer.accumulate_grad_batches", "1", CONFIG_MAKE_BLOCK, NULL},
    {CONFIG_TRAINING, "trainer.log_every_n_steps", "50", CONFIG_MAKE_BLOCK, NULL},
    {CONFIG_TRAINING, "trainer.num_sanity_val_steps", "2", CONFIG_MAKE_BLOCK, NULL},
    {CONFIG_TRAINING, "trainer.dist_timeout", "300", CONFIG_MAKE_BLOCK, NULL},
    {CONFIG_TRAINING, "tokenizer.character_coverage", "1.0", 0, NULL},
    /* ESPnet2's GlobalMVN / UtteranceMVN eps: the block is made when model.normalize names a class */
    {CONFIG_TRAINING, "model.normalize_conf.eps", "1e-20", CONFIG_MAKE_BLOCK, "model.normalize"},
    /* local_gpu left out: one worker per visible GPU (core/runner/runner_gpu.c counts them) */
    {CONFIG_TRAINING, "parallel.n_workers", "1", 0, "parallel.env!=local_gpu"},
    {CONFIG_INFERENCE, "parallel.n_workers", "1", 0, "parallel.env!=local_gpu"},
    {CONFIG_METRICS, "parallel.n_workers", "1", 0, "parallel.env!=local_gpu"},
    /* ESPnet2's CommonPreprocessor, when the config has a preprocessor block ("..." a string) */
    {CONFIG_TRAINING, "dataset.preprocessor.data_aug_num", "[1, 1]", 0, NULL},
    {CONFIG_TRAINING, "dataset.preprocessor.data_aug_prob", "0.0", 0, NULL},
    {CONFIG_TRAINING, "dataset.preprocessor.rir_apply_prob", "1.0", 0, NULL},
    {CONFIG_TRAINING, "dataset.preprocessor.noise_apply_prob", "1.0", 0, NULL},
    {CONFIG_TRAINING, "dataset.preprocessor.noise_db_range", "\"3_10\"", 0, NULL},
    {CONFIG_TRAINING, "dataset.preprocessor.short_noise_thres", "0.5", 0, NULL},
    {CONFIG_INFERENCE, "model.beam_size", "1", 0, NULL},
    {CONFIG_INFERENCE, "model.nbest", "1", 0, NULL},
    {CONFIG_INFERENCE, "model.decoding_window", "640", 0, NULL}, /* asr_transducer_inference's defaults */
    {CONFIG_INFERENCE, "model.left_context", "32", 0, NULL},
    {CONFIG_INFERENCE, "model.batch_size", "1", 0, NULL}, /* ESPnet3's batch_size None: one at a time */
    /* long recordings (docs/decoding.md, "Long recordings", says why these values) */
    {CONFIG_INFERENCE, "longform.enabled", "true", CONFIG_MAKE_BLOCK, NULL},
    {CONFIG_INFERENCE, "longform.window", "10.0", CONFIG_MAKE_BLOCK, NULL},
    {CONFIG_INFERENCE, "longform.overlap", "2.0", CONFIG_MAKE_BLOCK, NULL},
    {CONFIG_INFERENCE, "longform.threshold", "30.0", CONFIG_MAKE_BLOCK, NULL},
};

/* Lightning's callbacks' defaults by class (the last part of trainer.callbacks[]._target_), written
 * into each entry of that class. EMAWeightAveraging's update_starting_at_step/epoch default to None
 * (no start), which its reader takes from the key being left out. */
static const struct {
    const char *cls, *key, *value;
} callback_defaults[] = {
    {"EarlyStopping", "patience", "3"},
    {"EarlyStopping", "strict", "true"},
    {"EarlyStopping", "check_finite", "true"},
    {"EMAWeightAveraging", "decay", "0.999"},
    {"EMAWeightAveraging", "update_every_n_steps", "1"},
    {"EMAWeightAveraging", "use_buffers", "true"},
};

static void fill_callbacks(ynode *root)
{
    ynode *seq = yt_get_path(root, "trainer.callbacks");
    for (size_t i = 0; seq && seq->kind == YN_SEQ && i < seq->n; i++) {
        ynode *cb = seq->items[i];
        const ynode *t = cb->kind == YN_MAP ? yt_map_get(cb, "_target_") : NULL;
        const char *dot = t && t->kind == YN_SCALAR ? strrchr(t->str, '.') : NULL;
        for (size_t k = 0; dot && k < sizeof callback_defaults / sizeof *callback_defaults; k++)
            if (!strcmp(dot + 1, callback_defaults[k].cls) && !yt_map_get(cb, callback_defaults[k].key))
                yt_map_set(cb, callback_defaults[k].key, cb->mark, yt_scalar(callback_defaults[k].value, 0, cb->mark));
    }
}

/* Keys with a second spelling: a config that writes the alias and not the key means the key (both
 * written: they must agree, config_check_values). */
static const struct {
    config_kind kind;
    const char *alias, *key;
} key_aliases[] = {
    {CONFIG_INFERENCE, "batch_size", "model.batch_size"}, /* ESPnet3's form of Speech2Text's argument */
};

const config_default *config_defaults(size_t *n)
{
    *n = sizeof key_defaults / sizeof *key_defaults;
    return key_defaults;
}

const char *config_default_value(const char *schema_path)
{
    for (size_t i = 0; i < sizeof key_defaults / sizeof *key_defaults; i++)
        if (!strcmp(key_defaults[i].path, schema_path)) return key_defaults[i].value;
    return NULL;
}

const ynode *config_set_at(const ynode *root, const char *path)
{
    const ynode *n = yt_get_path(root, path);
    return n && !yt_is_null(n) ? n : NULL;
}

static ynode *default_node(const char *value, ymark mark);

/* Whether d's `when` holds in root. */
static int default_applies(const config_default *d, const ynode *root)
{
    if (!d->when) return 1;
    const char *w = d->when + (d->when[0] == '!'), *ne = strstr(w, "!=");
    char *path = ne ? xstrndup(w, (size_t)(ne - w)) : xstrdup(w);
    const ynode *n = config_set_at(root, path);
    free(path);
    if (ne) return !(n && n->kind == YN_SCALAR && !strcmp(n->str, ne + 2));
    return d->when[0] == '!' ? !n : n != NULL;
}

void config_fill_declared(const config_default *table, size_t n, config_kind kind, ynode *root)
{
    for (size_t i = 0; i < n; i++) {
        const config_default *d = &table[i];
        if (d->kind != kind || !default_applies(d, root)) continue;
        ynode *m = root;
        const char *p = d->path;
        for (size_t k = strcspn(p, "."); m && p[k]; p += k + 1, k = strcspn(p, ".")) {
            char *part = xstrndup(p, k);
            ynode *child = yt_map_get(m, part);
            if (!child && (d->flags & CONFIG_MAKE_BLOCK)) {
                yt_map_set(m, part, m->mark, yt_map(m->mark));
                child = yt_map_get(m, part);
            }
            free(part);
            m = child && child->kind == YN_MAP ? child : NULL;
        }
        if (m && !yt_map_get(m, p)) yt_map_set(m, p, m->mark, default_node(d->value, m->mark));
    }
}

void config_fill_left_out(config_kind kind, ynode *root)
{
    for (size_t i = 0; i < sizeof key_aliases / sizeof *key_aliases; i++) {
        const ynode *a = key_aliases[i].kind == kind ? config_set_at(root, key_aliases[i].alias) : NULL;
        const char *dot = strrchr(key_aliases[i].key, '.');
        char *parent = xstrndup(key_aliases[i].key, (size_t)(dot - key_aliases[i].key));
        ynode *m = yt_get_path(root, parent);
        free(parent);
        if (a && m && m->kind == YN_MAP && !yt_map_get(m, dot + 1)) yt_map_set(m, dot + 1, a->mark, yt_copy(a));
    }
    config_fill_declared(key_defaults, sizeof key_defaults / sizeof *key_defaults, kind, root);
    if (kind == CONFIG_TRAINING) fill_callbacks(root);
    /* A block made above (model.normalize_conf) takes ESPnet2's switches too. */
    config_fill_defaults(kind, root);
}

int config_check_aliases(config_kind kind, const ynode *root, esp_err *err)
{
    for (size_t i = 0; i < sizeof key_aliases / sizeof *key_aliases; i++) {
        const ynode *a = key_aliases[i].kind == kind ? config_set_at(root, key_aliases[i].alias) : NULL;
        const ynode *k = a ? config_set_at(root, key_aliases[i].key) : NULL;
        if (k && (a->kind != YN_SCALAR || k->kind != YN_SCALAR || strcmp(a->str, k->str) != 0))
            return config_fail_node(err, a, key_aliases[i].alias, "%s and %s: %s disagree (they say the same thing: "
                                    "keep one)", a->kind == YN_SCALAR ? a->str : "...", key_aliases[i].key,
                                    k->kind == YN_SCALAR ? k->str : "...");
    }
    return 0;
}

/* ---- defaults written into the tree ---------------------------------------------------------- */

/* Keys whose ESPnet2 default is not 0 / false: an absent key would read as 0 in the typed struct, so
 * the default is written into the tree when the block exists (an absent block means defaults). */
static const struct {
    const char *map_path, *key, *value;
} default_true[] = {
    {"model.specaug_conf", "apply_time_warp", "true"},
    {"model.specaug_conf", "apply_freq_mask", "true"},
    {"model.specaug_conf", "apply_time_mask", "true"},
    {"model.normalize_conf", "norm_means", "true"},
    {"model.ctc_conf", "zero_infinity", "true"},
    {"model.ctc_conf", "reduce", "true"},
    {"model.decoder_conf", "use_output_layer", "true"},
    {"model.decoder_conf", "normalize_before", "true"},
    {"model.decoder_conf", "dropout_rate", "0.1"},
    {"model.decoder_conf", "positional_dropout_rate", "0.1"},
};

/* The scheduler classes' defaults (torch's, ESPnet2's), written when the block names the class.
 * Required arguments (StepLR's step_size, ExponentialLR's gamma, CosineAnnealingLR's T_max,
 * MultiStepLR's milestones, CosineAnnealingWarmRestarts' T_0, OneCycleLR's max_lr and total_steps
 * or epochs and steps_per_epoch, ...) have none. WarmupLR's warmup_steps (25000) is
 * core/train/scheduler.c's. */
#define TORCH_SCHED "torch.optim.lr_scheduler."
#define PLATEAU_DEFAULTS(cls)                                                                                    \
    {cls, "mode", "min"}, {cls, "factor", "0.1"}, {cls, "patience", "10"}, {cls, "threshold", "0.0001"},        \
    {cls, "threshold_mode", "rel"}, {cls, "cooldown", "0"}, {cls, "min_lr", "0.0"}, {cls, "eps", "1e-08"}
static const struct {
    const char *target, *key, *value;
} scheduler_defaults[] = {
    {TORCH_SCHED "ConstantLR", "factor", "0.3333333333333333"},
    {TORCH_SCHED "ConstantLR", "total_iters", "5"},
    {TORCH_SCHED "StepLR", "gamma", "0.1"},
    {TORCH_SCHED "LinearLR", "start_factor", "0.3333333333333333"},
    {TORCH_SCHED "LinearLR", "end_factor", "1.0"},
    {TORCH_SCHED "LinearLR", "total_iters", "5"},
    {TORCH_SCHED "CosineAnnealingLR", "eta_min", "0.0"},
    {TORCH_SCHED "MultiStepLR", "gamma", "0.1"},
    {TORCH_SCHED "PolynomialLR", "total_iters", "5"},
    {TORCH_SCHED "PolynomialLR", "power", "1.0"},
    {TORCH_SCHED "CosineAnnealingWarmRestarts", "T_mult", "1"},
    {TORCH_SCHED "CosineAnnealingWarmRestarts", "eta_min", "0.0"},
    {TORCH_SCHED "OneCycleLR", "pct_start", "0.3"},
    {TORCH_SCHED "OneCycleLR", "anneal_strategy", "cos"},
    {TORCH_SCHED "OneCycleLR", "cycle_momentum", "true"},
    {TORCH_SCHED "OneCycleLR", "base_momentum", "0.85"},
    {TORCH_SCHED "OneCycleLR", "max_momentum", "0.95"},
    {TORCH_SCHED "OneCycleLR", "div_factor", "25.0"},
    {TORCH_SCHED "OneCycleLR", "final_div_factor", "10000.0"},
    {TORCH_SCHED "OneCycleLR", "three_phase", "false"},
    PLATEAU_DEFAULTS(TORCH_SCHED "ReduceLROnPlateau"),
    {"espnet2.schedulers.noam_lr.NoamLR", "model_size", "320"},
    {"espnet2.schedulers.noam_lr.NoamLR", "warmup_steps", "25000"},
    {"espnet2.schedulers.warmup_step_lr.WarmupStepLR", "warmup_steps", "25000"},
    {"espnet2.schedulers.warmup_step_lr.WarmupStepLR", "steps_per_epoch", "10000"},
    {"espnet2.schedulers.warmup_step_lr.WarmupStepLR", "step_size", "1"},
    {"espnet2.schedulers.warmup_step_lr.WarmupStepLR", "gamma", "0.1"},
    {"espnet2.schedulers.piecewise_linear_warmup_lr.PiecewiseLinearWarmupLR", "warmup_steps_list", "[0, 25000]"},
    {"espnet2.schedulers.piecewise_linear_warmup_lr.PiecewiseLinearWarmupLR", "warmup_lr_list", "[0.0, 0.001]"},
    {"espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts", "cycle_mult", "1.0"},
    {"espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts", "max_lr", "0.1"},
    {"espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts", "min_lr", "0.001"},
    {"espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts", "warmup_steps", "0"},
    {"espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts", "gamma", "1.0"},
    {"espnet2.schedulers.exponential_decay_warmup.ExponentialDecayWarmup", "warmup_steps", "0"},
    {"espnet2.schedulers.exponential_decay_warmup.ExponentialDecayWarmup", "warm_from_zero", "false"},
    {"espnet2.schedulers.tristage_lr.TristageLR", "max_steps", "25000"},
    {"espnet2.schedulers.tristage_lr.TristageLR", "warmup_ratio", "0.1"},
    {"espnet2.schedulers.tristage_lr.TristageLR", "hold_ratio", "0.4"},
    {"espnet2.schedulers.tristage_lr.TristageLR", "decay_ratio", "0.5"},
    {"espnet2.schedulers.tristage_lr.TristageLR", "init_lr_scale", "0.01"},
    {"espnet2.schedulers.tristage_lr.TristageLR", "final_lr_scale", "0.01"},
    {ESPNET2_PLATEAU, "warmup_steps", "25000"},
    PLATEAU_DEFAULTS(ESPNET2_PLATEAU),
};

/* A default's value as a node: a flow list "[a, b]" becomes a list of scalars. */
static ynode *default_node(const char *value, ymark mark)
{
    if (value[0] == '"') {
        char *inner = xstrndup(value + 1, strlen(value) - 2);
        ynode *n = yt_scalar(inner, 1, mark);
        free(inner);
        return n;
    }
    if (value[0] != '[') return yt_scalar(value, 0, mark);
    ynode *seq = yt_seq(mark);
    char buf[64];
    for (const char *p = value + 1; *p && *p != ']';) {
        size_t l = strcspn(p, ",]");
        snprintf(buf, sizeof buf, "%.*s", (int)l, p);
        yt_seq_push(seq, yt_scalar(buf, 0, mark));
        p += l;
        if (*p == ',') p++;
        while (*p == ' ') p++;
    }
    return seq;
}

static void fill_scheduler(ynode *root)
{
    ynode *t = yt_get_path(root, "scheduler._target_"), *sc = yt_get_path(root, "scheduler");
    if (!t || t->kind != YN_SCALAR || !sc || sc->kind != YN_MAP) return;
    for (size_t i = 0; i < sizeof scheduler_defaults / sizeof *scheduler_defaults; i++)
        if (!strcmp(t->str, scheduler_defaults[i].target) && !yt_map_get(sc, scheduler_defaults[i].key))
            yt_map_set(sc, scheduler_defaults[i].key, sc->mark, default_node(scheduler_defaults[i].value, sc->mark));
}

/* Adadelta's rho defaults to 0.9 and 0 is a value of its own (only the newest gradient), so the
 * default is written when the block names the class. */
static void fill_optimizer(ynode *root)
{
    ynode *t = yt_get_path(root, "optimizer._target_"), *oc = yt_get_path(root, "optimizer");
    if (t && t->kind == YN_SCALAR && !strcmp(t->str, "torch.optim.Adadelta") && oc->kind == YN_MAP &&
        !yt_map_get(oc, "rho"))
        yt_map_set(oc, "rho", oc->mark, yt_scalar("0.9", 0, oc->mark));
}

/* TransformerLM's dropout rates default to 0.1 (SequentialRNNLM's dropout_rate to 0): written into
 * model.lm_conf when the block exists and model.lm is transformer. */
static void fill_lm_dropout(ynode *root)
{
    ynode *lm = yt_get_path(root, "model.lm"), *lc = yt_get_path(root, "model.lm_conf");
    if (!lm || lm->kind != YN_SCALAR || strcmp(lm->str, "transformer") != 0 || !lc || lc->kind != YN_MAP) return;
    static const char *const keys[] = {"dropout_rate", "positional_dropout_rate", "attention_dropout_rate"};
    for (size_t i = 0; i < 3; i++)
        if (!yt_map_get(lc, keys[i])) yt_map_set(lc, keys[i], lc->mark, yt_scalar("0.1", 0, lc->mark));
}

/* Whether model.decoder is `name`. */
static int decoder_is(ynode *root, const char *name)
{
    ynode *dec = yt_get_path(root, "model.decoder");
    return dec && dec->kind == YN_SCALAR && !strcmp(dec->str, name);
}

/* model_conf.ctc_weight defaults to 0.5 in ESPnet2's ESPnetASRModel; it matters only with an
 * attention or transducer decoder (without one, training is CTC only), so only then is the default
 * written. */
static void fill_ctc_weight(ynode *root)
{
    if (!decoder_is(root, "transformer") && !decoder_is(root, "transducer")) return;
    ynode *model = yt_get_path(root, "model");
    ynode *mc = yt_map_get(model, "model_conf");
    if (!mc) {
        yt_map_set(model, "model_conf", model->mark, yt_map(model->mark));
        mc = yt_map_get(model, "model_conf");
    }
    if (mc->kind == YN_MAP && !yt_map_get(mc, "ctc_weight"))
        yt_map_set(mc, "ctc_weight", mc->mark, yt_scalar("0.5", 0, mc->mark));
}

/* model.normalize left out is ESPnet2's ASRTask (and ASRTransducerTask) default, utterance_mvn:
 * ESPnet3 builds the model from the task's default config updated by the config's model block.
 * null (kept by the validator) is none. The LM task has no normalize. */
static void fill_normalize(ynode *root)
{
    ynode *model = yt_get_path(root, "model");
    if (!model || model->kind != YN_MAP || yt_map_get(model, "normalize") || config_is_lm_task(root)) return;
    yt_map_set(model, "normalize", model->mark, yt_scalar("utterance_mvn", 0, model->mark));
}

void config_fill_defaults(config_kind kind, ynode *root)
{
    if (kind != CONFIG_TRAINING) return;
    fill_normalize(root); /* before the switches of its normalize_conf below */
    for (size_t i = 0; i < sizeof default_true / sizeof *default_true; i++) {
        /* decoder_conf's are the TransformerDecoder's: a TransducerDecoder takes none of them, nor
         * the asr_transducer task's decoders (its encoder_conf has body_conf). */
        if ((decoder_is(root, "transducer") || yt_get_path(root, "model.encoder_conf.body_conf")) &&
            !strcmp(default_true[i].map_path, "model.decoder_conf"))
            continue;
        ynode *m = yt_get_path(root, default_true[i].map_path);
        if (m && m->kind == YN_MAP && !yt_map_get(m, default_true[i].key))
            yt_map_set(m, default_true[i].key, m->mark, yt_scalar(default_true[i].value, 0, m->mark));
    }
    /* norm_vars: true for global_mvn, false for utterance_mvn (ESPnet2's two classes differ). */
    ynode *nc = yt_get_path(root, "model.normalize_conf");
    if (nc && nc->kind == YN_MAP && !yt_map_get(nc, "norm_vars")) {
        ynode *kind_node = yt_get_path(root, "model.normalize");
        int utt = kind_node && kind_node->kind == YN_SCALAR && !strcmp(kind_node->str, "utterance_mvn");
        yt_map_set(nc, "norm_vars", nc->mark, yt_scalar(utt ? "false" : "true", 0, nc->mark));
    }
    fill_ctc_weight(root);
    fill_lm_dropout(root);
    fill_scheduler(root);
    fill_optimizer(root);
}
