#include "core/config/config_values.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_schema.h"

/* ---- ranges of numbers --------------------------------------------------------------------- */

enum {
    LO_OPEN = 1,   /* lo itself is not allowed */
    HI_OPEN = 2,   /* hi itself is not allowed */
    MINUS_ONE = 4, /* -1 is allowed too (Lightning's "no limit") */
    EVEN = 8,      /* an even number */
    /* Lightning's int-or-float keys: a float in (0, 1] is a fraction, an integer >= 2 a count of
     * batches. The typed field is a double, where 1 and 1.0 read the same: the integer 1 (one batch
     * in Lightning) is refused rather than read as all batches. */
    COUNT_OR_FRACTION = 16,
    INT_ONE_OK = 32, /* with COUNT_OR_FRACTION: the integer 1 is one batch (the value stays typed as written) */
    INTEGER = 64,    /* a whole number (for lists read from the tree, where no int field types it) */
};

typedef struct num_rule {
    const char *path; /* schema path: '*' one component, "[]" a list item */
    double lo, hi;
    unsigned flags;
    const char *need; /* what the value must be, as printed */
    const char *hint;
} num_rule;

#define INF HUGE_VAL
#define DROPOUT(p) {p, 0, 1, HI_OPEN, "in [0, 1)", "0: no dropout"}

static const num_rule num_rules[] = {
    /* training: top level */
    {"num_device", 1, INF, 0, ">= 1", "devices per node, passed on by ${num_device}; leave it out for 1"},
    {"num_nodes", 1, INF, 0, ">= 1", "leave it out for 1"},
    {"seed", 0, 4294967295.0, 0, "in [0, 4294967295]", "numpy's RandomState, which orders the batches, takes 32-bit seeds"},
    /* create_dataset */
    {"create_dataset.num_train", 1, INF, 0, ">= 1", "utterances to make; leave it out for the recipe's default"},
    {"create_dataset.num_valid", 1, INF, 0, ">= 1", "utterances to make; leave it out for the recipe's default"},
    {"create_dataset.num_test", 1, INF, 0, ">= 1", "utterances to make; leave it out for the recipe's default"},
    {"create_dataset.num_test_engine", 1, INF, 0, ">= 1", "utterances to make; leave it out for num_test"},
    {"create_dataset.num_rirs", 1, 1000, 0, "in [1, 1000]", "generated room impulse responses; leave it out for none"},
    {"create_dataset.num_noises", 1, 1000, 0, "in [1, 1000]", "generated noises; leave it out for none"},
    {"create_dataset.min_words", 1, INF, 0, ">= 1", "leave it out for the recipe's default"},
    {"create_dataset.max_words", 1, INF, 0, ">= 1", "leave it out for the recipe's default"},
    {"create_dataset.fs", 1000, 192000, 0, "a sample rate in [1000, 192000] Hz", "leave it out for 16000"},
    {"create_dataset.nj", 1, 1024, 0, "in [1, 1024]", "parallel processes; leave it out for one per CPU"},
    {"create_dataset.speed_range[]", 1, INF, 0, ">= 1", "words per minute"},
    {"create_dataset.pitch_range[]", 0, 99, 0, "in [0, 99]", "espeak-ng's pitch scale"},
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
     * ([weight, effect, {arguments}], also inside a group) are read from the tree by
     * core/data/augment_conf.c through config_read_number, under the paths data_aug_effects[].weight
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
    {"batch_size", 1, 4096, 0, "in [1, 4096]", "utterances per model call (ESPnet3's form of model.batch_size); null: "
                                               "one at a time"},
    {"model.ctc_weight", 0, 1, 0, "in [0, 1]", "1.0 for a CTC-only model"},
    {"model.lm_weight", 0, INF, 0, ">= 0", "0: no language model"},
    {"longform.window", 0, 3600, LO_OPEN, "in (0, 3600] seconds", "seconds per window"},
    {"longform.overlap", 0, 1800, LO_OPEN, "in (0, 1800] seconds", "seconds neighbouring windows share, at most "
                                                                   "half the window"},
    {"longform.threshold", 0, INF, 0, ">= 0 seconds", "items longer than this are decoded in windows"},
};

static int in_range(const num_rule *r, const ynode *n, double v)
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

int config_check_number(const ynode *n, const char *schema_path, const char *path, double v, esp_err *err)
{
    for (size_t i = 0; i < sizeof num_rules / sizeof *num_rules; i++) {
        const num_rule *r = &num_rules[i];
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

int config_db_range(const ynode *n, const char *path, double *lo, double *hi, esp_err *err)
{
    if (n->kind == YN_SCALAR) {
        const char *s = n->str;
        char *end;
        errno = 0;
        double a = strtod(s, &end), b = a;
        int ok = end != s && errno == 0;
        if (ok && *end == '_') {
            const char *s2 = end + 1;
            b = strtod(s2, &end);
            ok = end != s2 && errno == 0;
        }
        ok = ok && *end == '\0' && isfinite(a) && isfinite(b) && fabs(a) <= MAX_DB && fabs(b) <= MAX_DB;
        if (ok && a > b)
            return config_fail_node(err, n, path, "'%s': low %g is above high %g (write \"low_high\")", s, a, b);
        if (ok) {
            *lo = a, *hi = b;
            return 0;
        }
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

/* The value of a key given by its path from the root (NULL when left out or null). */
static const ynode *set_at(const ynode *root, const char *path)
{
    const ynode *n = yt_get_path(root, path);
    return n && !yt_is_null(n) ? n : NULL;
}

/* Whether d's `when` holds in root. */
static ynode *default_node(const char *value, ymark mark);

const ynode *config_value_or_default(const ynode *map, const char *map_path, const char *key, ynode **owned)
{
    *owned = NULL;
    const ynode *n = map && map->kind == YN_MAP ? yt_map_get(map, key) : NULL;
    if (n && !yt_is_null(n)) return n;
    char *path = xasprintf("%s.%s", map_path, key);
    const char *value = config_default_value(path);
    free(path);
    if (value) *owned = default_node(value, n ? n->mark : map ? map->mark : (ymark){0});
    return *owned;
}

static int default_applies(const config_default *d, const ynode *root)
{
    if (!d->when) return 1;
    const char *w = d->when + (d->when[0] == '!'), *ne = strstr(w, "!=");
    char *path = ne ? xstrndup(w, (size_t)(ne - w)) : xstrdup(w);
    const ynode *n = set_at(root, path);
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
        const ynode *a = key_aliases[i].kind == kind ? set_at(root, key_aliases[i].alias) : NULL;
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

/* An alias and its key both written: one error at the alias unless they say the same. */
static int check_aliases(config_kind kind, const ynode *root, esp_err *err)
{
    for (size_t i = 0; i < sizeof key_aliases / sizeof *key_aliases; i++) {
        const ynode *a = key_aliases[i].kind == kind ? set_at(root, key_aliases[i].alias) : NULL;
        const ynode *k = a ? set_at(root, key_aliases[i].key) : NULL;
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
#define ESPNET2_PLATEAU "espnet2.schedulers.warmup_reducelronplateau.WarmupReduceLROnPlateau"
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

/* model_conf.ctc_weight defaults to 0.5 in ESPnet2's ESPnetASRModel; it matters only with an
 * attention decoder (without one, training is CTC only), so only then is the default written. */
static void fill_ctc_weight(ynode *root)
{
    ynode *dec = yt_get_path(root, "model.decoder");
    if (!dec || dec->kind != YN_SCALAR || strcmp(dec->str, "transformer") != 0) return;
    ynode *model = yt_get_path(root, "model");
    ynode *mc = yt_map_get(model, "model_conf");
    if (!mc) {
        yt_map_set(model, "model_conf", model->mark, yt_map(model->mark));
        mc = yt_map_get(model, "model_conf");
    }
    if (mc->kind == YN_MAP && !yt_map_get(mc, "ctc_weight"))
        yt_map_set(mc, "ctc_weight", mc->mark, yt_scalar("0.5", 0, mc->mark));
}

void config_fill_defaults(config_kind kind, ynode *root)
{
    if (kind != CONFIG_TRAINING) return;
    for (size_t i = 0; i < sizeof default_true / sizeof *default_true; i++) {
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


/* ---- rules between keys ------------------------------------------------------------------------ */

/* The number under key in map m, or 0 when it is not there. */
static int num_in(const ynode *m, const char *key, double *v, const ynode **node)
{
    const ynode *n = m ? yt_map_get(m, key) : NULL;
    if (node) *node = n;
    return n && yt_as_float(n, v);
}

static char *key_path(const char *map_path, const char *key) { return xasprintf("%s.%s", map_path, key); }

/* A fail for the value under key in the map at map_path. */
static int fail_key(esp_err *err, const ynode *n, const char *map_path, const char *key, const char *what)
{
    char *p = key_path(map_path, key);
    int rc = config_fail_node(err, n, p, "%s", what);
    free(p);
    return rc;
}

/* The samplers of core/data/sampler.c: numel and length fill batches up to batch_bins feature
 * values, sorted and unsorted split into batches of batch_size utterances; all read shape files. */
static int check_batches(const ynode *root, const char *split, esp_err *err)
{
    char path[96], what[400];
    snprintf(path, sizeof path, "dataloader.%s.iter_factory.batches", split);
    const ynode *b = yt_get_path(root, path);
    if (!b || b->kind != YN_MAP) return 0;
    const ynode *type = yt_map_get(b, "type");
    const char *t = type ? type->str : "numel";
    int bins = !strcmp(t, "numel") || !strcmp(t, "length");
    const char *need = bins ? "batch_bins" : "batch_size";
    if (!yt_map_get(b, need)) {
        snprintf(what, sizeof what, "%s batches%s need %s (%s)", t, type ? "" : " (the default type)", need,
                 bins ? "feature values per batch, e.g. 1000000; or type sorted with batch_size"
                      : "utterances per batch, e.g. 16; or type numel with batch_bins");
        return type ? fail_key(err, type, path, "type", what) : config_fail_node(err, b, path, "%s", what);
    }
    const ynode *sf = yt_map_get(b, "shape_files");
    snprintf(what, sizeof what, "list the shape files that stage 3 writes, e.g. ${stats_dir}/%s/feats_shape", split);
    if (!sf) return config_fail_node(err, b, path, "shape_files is missing (%s)", what);
    if (sf->n == 0) {
        char *p = key_path(path, "shape_files");
        config_fail_node(err, sf, p, "the list is empty (%s)", what);
        free(p);
        return -1;
    }
    return 0;
}

/* What core/data/frontend.c checks when stage 3 starts, with ESPnet2's defaults for left-out keys. */
static int check_frontend(const ynode *root, esp_err *err)
{
    const char *P = "model.frontend_conf";
    const ynode *fc = yt_get_path(root, P), *n;
    if (!fc || fc->kind != YN_MAP) return 0;
    double fs = 16000, n_fft = 512, win, fmin = 0, fmax, n_mels;
    char what[200];
    num_in(fc, "fs", &fs, NULL);
    num_in(fc, "n_fft", &n_fft, NULL);
    num_in(fc, "fmin", &fmin, NULL);
    if (num_in(fc, "win_length", &win, &n) && win > n_fft) {
        snprintf(what, sizeof what, "%g is above n_fft = %g (the window must fit in the FFT frame; leave it out for n_fft)",
                 win, n_fft);
        return fail_key(err, n, P, "win_length", what);
    }
    if (num_in(fc, "fmax", &fmax, &n) && (fmax <= fmin || fmax > fs / 2)) {
        snprintf(what, sizeof what, "%g is not in (fmin = %g, fs/2 = %g] (leave it out for fs/2)", fmax, fmin, fs / 2);
        return fail_key(err, n, P, "fmax", what);
    }
    if (num_in(fc, "fmin", &fmin, &n) && fmin >= fs / 2) {
        snprintf(what, sizeof what, "%g is not below fs/2 = %g (leave it out for 0)", fmin, fs / 2);
        return fail_key(err, n, P, "fmin", what);
    }
    (void)n_mels; /* its least value depends on the input layer: check_input_layer */
    return 0;
}

/* model.encoder_conf.input_layer against the encoder and the features (core/nn/model_embed.c). */
static int check_input_layer(const ynode *root, esp_err *err)
{
    const char *E = "model.encoder_conf";
    const ynode *enc = yt_get_path(root, E), *il = enc && enc->kind == YN_MAP ? yt_map_get(enc, "input_layer") : NULL;
    const ynode *kind = yt_get_path(root, "model.encoder"), *nm = yt_get_path(root, "model.frontend_conf.n_mels");
    const char *layer = il ? il->str : "conv2d";
    int conformer = kind && kind->kind == YN_SCALAR && !strcmp(kind->str, "conformer");
    int ebf = kind && kind->kind == YN_SCALAR && !strcmp(kind->str, "e_branchformer");
    const ynode *pe = enc && enc->kind == YN_MAP ? yt_map_get(enc, "pos_enc_layer_type") : NULL;
    int rel_pos = pe ? pe->kind == YN_SCALAR && !strcmp(pe->str, "rel_pos") : ebf; /* e_branchformer's default */
    double n_mels = 80, d = 256;
    if (nm) yt_as_float(nm, &n_mels);
    num_in(enc, "output_size", &d, NULL);
    char what[300];
    if (!strcmp(layer, "embed"))
        return fail_key(err, il, E, "input_layer",
                        "embed (nn.Embedding) takes token ids, but the ASR model's input is the frontend's log-mel "
                        "features (ESPnet's Embedding fails on them too): use conv2d, linear or null");
    if (!strcmp(layer, "conv1d2") && conformer)
        return fail_key(err, il, E, "input_layer",
                        "conv1d2 is a TransformerEncoder input layer; ConformerEncoder has none (ESPnet2 raises "
                        "'unknown input_layer'): use conv2d, conv2d2, conv2d6, conv2d8, linear or null");
    if (!strcmp(layer, "null") && conformer && n_mels != d) {
        snprintf(what, sizeof what, "null (the positional encoding alone) needs the feature dimension (n_mels = %g) "
                 "to equal output_size = %g", n_mels, d);
        return fail_key(err, il, E, "input_layer", what);
    }
    if (!strcmp(layer, "null") && ebf && rel_pos && n_mels != d) {
        snprintf(what, sizeof what, "null with n_mels = %g != output_size = %g is a plain Linear without the relative "
                 "positions rel_pos attention needs (ESPnet2 fails on it): use abs_pos, or n_mels = output_size",
                 n_mels, d);
        return fail_key(err, il, E, "input_layer", what);
    }
    int least = !strcmp(layer, "conv2d6") ? 11 : !strcmp(layer, "conv2d8") ? 15
              : !strcmp(layer, "conv2d") || !strcmp(layer, "conv2d2") ? 7 : 1;
    if (n_mels < least) {
        snprintf(what, sizeof what, "is below %d, the least the encoder's %s input layer can subsample (leave it out "
                 "for 80)", least, layer);
        return nm ? fail_key(err, nm, "model.frontend_conf", "n_mels", what) : fail_key(err, il, E, "input_layer", what);
    }
    return 0;
}

/* What core/nn/model_params.c and core/data/specaug.c check when the model is built. */
static int check_model(const ynode *root, esp_err *err)
{
    const ynode *enc = yt_get_path(root, "model.encoder_conf"), *n;
    double d = 256, heads = 4;
    char what[200];
    int has_d = num_in(enc, "output_size", &d, &n), has_h = num_in(enc, "attention_heads", &heads, NULL);
    if ((has_d || has_h) && fmod(d, heads) != 0) {
        snprintf(what, sizeof what, "%g is not a multiple of attention_heads = %g (each head takes output_size / "
                 "attention_heads)", d, heads);
        return fail_key(err, has_d ? n : yt_map_get(enc, "attention_heads"), "model.encoder_conf", "output_size", what);
    }
    const char *S = "model.specaug_conf";
    const ynode *sc = yt_get_path(root, S);
    if (!sc || sc->kind != YN_MAP) return 0;
    static const char *const ranges[] = {"freq_mask_width_range", "time_mask_width_range", "time_mask_width_ratio_range"};
    for (int i = 0; i < 3; i++) {
        const ynode *r = yt_map_get(sc, ranges[i]);
        double lo, hi;
        if (r && r->n == 2 && yt_as_float(r->items[0], &lo) && yt_as_float(r->items[1], &hi) && !(lo < hi)) {
            snprintf(what, sizeof what, "[%g, %g] is not a range [lo, hi) with lo < hi (widths are drawn from it)", lo, hi);
            return fail_key(err, r, S, ranges[i], what);
        }
    }
    const ynode *both = yt_map_get(sc, "time_mask_width_ratio_range"), *on = yt_map_get(sc, "apply_time_mask");
    int apply = 1;
    if (both && yt_map_get(sc, "time_mask_width_range") && (!on || (yt_as_bool(on, &apply) && apply)))
        return fail_key(err, both, S, "time_mask_width_ratio_range",
                        "is set together with time_mask_width_range (keep one of the two)");
    return 0;
}

static int check_create_dataset(const ynode *root, esp_err *err)
{
    const char *C = "create_dataset";
    const ynode *cd = yt_get_path(root, C), *n;
    if (!cd || cd->kind != YN_MAP) return 0;
    double lo, hi;
    char what[200];
    if (num_in(cd, "min_words", &lo, &n) && num_in(cd, "max_words", &hi, NULL) && lo > hi) {
        snprintf(what, sizeof what, "%g is above max_words = %g (lower min_words or raise max_words)", lo, hi);
        return fail_key(err, n, C, "min_words", what);
    }
    static const char *const ranges[] = {"speed_range", "pitch_range"};
    for (int i = 0; i < 2; i++) {
        const ynode *r = yt_map_get(cd, ranges[i]);
        if (r && r->n == 2 && yt_as_float(r->items[0], &lo) && yt_as_float(r->items[1], &hi) && lo > hi) {
            snprintf(what, sizeof what, "low %g is above high %g (write it as [low, high])", lo, hi);
            return fail_key(err, r, C, ranges[i], what);
        }
    }
    return 0;
}

/* The keyword arguments of torch 2.11's optimizers that espnet3 builds. */
static const struct {
    const char *target, *cls, *keys;
} optimizer_keys[] = {
    {"torch.optim.Adam", "Adam",
     "lr, betas, eps, weight_decay, amsgrad, foreach, maximize, capturable, differentiable, fused, "
     "decoupled_weight_decay"},
    {"torch.optim.AdamW", "AdamW",
     "lr, betas, eps, weight_decay, amsgrad, maximize, foreach, capturable, differentiable, fused"},
    {"torch.optim.SGD", "SGD", "lr, momentum, dampening, weight_decay, nesterov, maximize, foreach, differentiable, fused"},
    {"torch.optim.Adadelta", "Adadelta", "lr, rho, eps, weight_decay, foreach, capturable, maximize, differentiable"},
};

/* Whether key is one of the ", "-separated names of list. */
static int in_key_list(const char *list, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = list; (p = strstr(p, key)); p += k)
        if ((p == list || p[-1] == ' ') && (p[k] == ',' || p[k] == '\0')) return 1;
    return 0;
}

/* torch's own checks of the optimizer's arguments, with its wording, at the argument's line; and
 * its implementation switches, accepted where they leave the single-tensor update's bits alone
 * (what scripts/make_sgd_adadelta_fixtures.py checks against torch 2.11 on the CPU):
 * - foreach (true, false, null): torch's _foreach ops run per tensor on the CPU: the same bits;
 *   espnet3 computes the single-tensor update for every value;
 * - fused: true runs torch's fused kernels, which round otherwise (SGD with momentum, Adam,
 *   AdamW): refused; false and null are the single-tensor path;
 * - capturable: true makes Adam/AdamW compute step and the bias corrections as float32 tensors
 *   (other bits): refused there; Adadelta's update never reads step, so there it changes nothing;
 * - differentiable: true fails in torch at the first step of a model's parameters (an in-place
 *   update of a leaf that requires grad), and changes Adam's path: refused. */
static int check_optimizer(const ynode *root, esp_err *err)
{
    const char *O = "optimizer";
    const ynode *oc = yt_get_path(root, O), *t = oc && oc->kind == YN_MAP ? yt_map_get(oc, "_target_") : NULL, *n;
    if (!t || t->kind != YN_SCALAR) return 0;
    size_t i = 0, nk = sizeof optimizer_keys / sizeof *optimizer_keys;
    while (i < nk && strcmp(t->str, optimizer_keys[i].target) != 0) i++;
    if (i == nk) return 0; /* the _target_ check names what is built */
    const char *cls = optimizer_keys[i].cls;
    char what[400];
    for (size_t k = 0; k < oc->n; k++)
        if (strcmp(oc->keys[k], "_target_") != 0 && !in_key_list(optimizer_keys[i].keys, oc->keys[k])) {
            snprintf(what, sizeof what, "%s.__init__() got an unexpected keyword argument '%s' (torch's %s takes %s)",
                     cls, oc->keys[k], t->str, optimizer_keys[i].keys);
            return fail_key(err, oc->items[k], O, oc->keys[k], what);
        }
    int on = 0, adam = !strcmp(cls, "Adam") || !strcmp(cls, "AdamW");
    if ((n = yt_map_get(oc, "fused")) && yt_as_bool(n, &on) && on)
        return fail_key(err, n, O, "fused", "fused=True runs torch's fused kernel, which rounds otherwise than the "
                                            "single-tensor update espnet3 computes (write false, or leave it out)");
    if ((n = yt_map_get(oc, "differentiable")) && yt_as_bool(n, &on) && on)
        return fail_key(err, n, O, "differentiable",
                        "torch's step with differentiable=True fails on a model's parameters ('a leaf Variable that "
                        "requires grad is being used in an in-place operation.'): write false, or leave it out");
    if (adam && (n = yt_map_get(oc, "capturable")) && yt_as_bool(n, &on) && on)
        return fail_key(err, n, O, "capturable",
                        "capturable=True computes step and the bias corrections as float32 tensors, which rounds "
                        "otherwise than the single-tensor update espnet3 computes (and torch refuses it for CPU "
                        "parameters): write false, or leave it out");
    double momentum = 0, dampening = 0, rho;
    num_in(oc, "dampening", &dampening, NULL);
    if (num_in(oc, "momentum", &momentum, &n) && !(momentum >= 0)) {
        snprintf(what, sizeof what, "Invalid momentum value: %g (torch's SGD takes momentum >= 0)", momentum);
        return fail_key(err, n, O, "momentum", what);
    }
    if ((n = yt_map_get(oc, "nesterov")) && yt_as_bool(n, &on) && on && (momentum <= 0 || dampening != 0)) {
        snprintf(what, sizeof what, "Nesterov momentum requires a momentum and zero dampening (momentum %g, "
                 "dampening %g)", momentum, dampening);
        return fail_key(err, n, O, "nesterov", what);
    }
    if (num_in(oc, "rho", &rho, &n) && !(rho >= 0 && rho <= 1)) {
        snprintf(what, sizeof what, "Invalid rho value: %g (torch's Adadelta takes rho in [0, 1])", rho);
        return fail_key(err, n, O, "rho", what);
    }
    return 0;
}

/* Lightning's max_epochs: None becomes 1000 when max_steps is unset (-1), -1 (no limit) when it is
 * set; -1 means no limit. The result is written into the tree so that the trainer and the
 * resolved config.yaml hold the number Lightning would use. */
static void lightning_max_epochs(ynode *root)
{
    ynode *t = yt_get_path(root, "trainer");
    if (!t || t->kind != YN_MAP) return;
    const ynode *me = yt_map_get(t, "max_epochs"), *ms = yt_map_get(t, "max_steps");
    int64_t epochs = 0, steps = -1;
    if (ms) yt_as_int(ms, &steps);
    char where[512];
    if (!me) {
        yt_map_set(t, "max_epochs", t->mark, yt_scalar(steps == -1 ? "1000" : "-1", 0, t->mark));
        if (steps == -1)
            log_info("%s: trainer.max_epochs: not set: Lightning's default, 1000 epochs", ymark_str(t->mark, where, sizeof where));
        else
            log_info("%s: trainer.max_epochs: not set and trainer.max_steps is %lld: no epoch limit (Lightning); "
                     "training stops at max_steps", ymark_str(t->mark, where, sizeof where), (long long)steps);
    } else if (yt_as_int(me, &epochs) && epochs == -1) {
        log_info("%s: trainer.max_epochs: -1: no epoch limit (Lightning); training runs until %s",
                 ymark_str(me->mark, where, sizeof where),
                 steps == -1 ? "it is stopped (trainer.max_steps is not set)" : "trainer.max_steps");
    }
}

/* The classes that divide by warmup_steps refuse 0 at its line (the others take 0: no warmup). */
static int check_scheduler_warmup(const ynode *root, esp_err *err)
{
    static const struct {
        const char *target, *name;
    } divide[] = {{"espnet2.schedulers.warmup_lr.WarmupLR", "WarmupLR"},
                  {"espnet2.schedulers.noam_lr.NoamLR", "NoamLR"},
                  {"espnet2.schedulers.warmup_step_lr.WarmupStepLR", "WarmupStepLR"},
                  {ESPNET2_PLATEAU, "WarmupReduceLROnPlateau"}};
    const ynode *t = yt_get_path(root, "scheduler._target_"), *w = yt_get_path(root, "scheduler.warmup_steps");
    double v;
    if (!t || t->kind != YN_SCALAR || !num_in(yt_get_path(root, "scheduler"), "warmup_steps", &v, NULL) || v >= 1)
        return 0;
    for (size_t i = 0; i < sizeof divide / sizeof *divide; i++)
        if (!strcmp(t->str, divide[i].target))
            return config_fail_node(err, w, "scheduler.warmup_steps", "must be >= 1, got %s (%s divides by it; leave "
                                    "it out for 25000)", w->str, divide[i].name);
    return 0;
}

/* Neighbouring windows overlap by at most half a window, so each window owns a part of its own. A
 * key left out counts as its default; the error is at the overlap's line, or the window's when the
 * overlap is the default. */
static int check_longform(const ynode *root, esp_err *err)
{
    const ynode *lf = yt_map_get(root, "longform"), *wn, *on;
    double w, o;
    if (!lf || lf->kind != YN_MAP) return 0;
    if (!num_in(lf, "window", &w, &wn)) w = atof(config_default_value("longform.window"));
    if (!num_in(lf, "overlap", &o, &on)) o = atof(config_default_value("longform.overlap"));
    if (o <= w / 2) return 0;
    char what[160];
    snprintf(what, sizeof what, "an overlap of %g s is more than half the window of %g s (shorten longform.overlap "
             "or lengthen longform.window)", o, w);
    return on ? fail_key(err, on, "longform", "overlap", what) : fail_key(err, wn, "longform", "window", what);
}

int config_check_values(config_kind kind, ynode *root, esp_err *err)
{
    if (check_aliases(kind, root, err) != 0) return -1;
    if (kind == CONFIG_INFERENCE) return check_longform(root, err);
    if (kind != CONFIG_TRAINING) return 0;
    if (check_scheduler_warmup(root, err) != 0) return -1;
    if (check_batches(root, "train", err) != 0 || check_batches(root, "valid", err) != 0) return -1;
    if (check_frontend(root, err) != 0 || check_model(root, err) != 0 || check_input_layer(root, err) != 0 ||
        check_create_dataset(root, err) != 0 || check_optimizer(root, err) != 0)
        return -1;
    const ynode *db = set_at(root, "dataset.preprocessor.noise_db_range");
    double lo, hi;
    if (db && config_db_range(db, "dataset.preprocessor.noise_db_range", &lo, &hi, err) != 0) return -1;
    lightning_max_epochs(root);
    return 0;
}
