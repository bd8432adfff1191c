/* The parameters of ESPnet2's Transformer-CTC ASR model as one flat float buffer with a size
 * table (llm.c style): every tensor has its ESPnet2 state-dict name, shape and offset, so
 * checkpoints map one to one, and gradients / optimizer moments are flat buffers of the same
 * layout. */
#ifndef ESPNET3_MODEL_PARAMS_H
#define ESPNET3_MODEL_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "core/config/config_types.h"
#include "core/base/log.h"

/* Sizes of the model (ESPnet2 encoder_conf names). */
typedef struct model_dims {
    int idim;            /* feature dimension (n_mels) */
    int d;               /* encoder_conf.output_size */
    int heads;           /* encoder_conf.attention_heads */
    int ff;              /* encoder_conf.linear_units */
    int blocks;          /* encoder_conf.num_blocks */
    int vocab;           /* len(token_list), <sos/eos> included */
    int f2;              /* feature bins after two stride-2 3x3 convs: ((idim - 1) / 2 - 1) / 2 */
    /* The attention decoder (model.decoder: transformer, decoder_conf) and the branches of the
     * joint loss; see core/nn/decoder_conf.h. dec_blocks 0: no decoder (CTC only, ctc_weight 1). */
    int dec_blocks;      /* decoder_conf.num_blocks */
    int dec_heads;       /* decoder_conf.attention_heads */
    int dec_ff;          /* decoder_conf.linear_units */
    int no_ctc;          /* model_conf.ctc_weight 0: no CTC branch (ESPnet2 then has no ctc module) */
} model_dims;

/* Fills dims from the config with ESPnet2's TransformerEncoder defaults (256, 4, 2048, 6), and the
 * decoder's from model.decoder / decoder_conf / model_conf.ctc_weight (decoder_dims_from_cfg). */
int model_dims_from_cfg(model_dims *out, const model_cfg *m, int idim, int vocab, esp_err *err);

enum { MODEL_MAX_NDIM = 4 };

typedef struct param_info {
    char name[96];       /* ESPnet2 state-dict name */
    int ndim;
    int64_t shape[MODEL_MAX_NDIM];
    size_t offset;       /* in floats, into the flat buffer */
    size_t count;
    int is_layernorm;    /* LayerNorm weight/bias: reset to 1/0 by every init scheme */
    int is_embedding;    /* nn.Embedding weight: N(0, 1) under every init scheme (reset_parameters) */
} param_info;

typedef struct param_table {
    param_info *items;
    size_t n;
    size_t total;        /* floats in the flat buffer */
} param_table;

void param_table_build(param_table *t, const model_dims *d);
void param_table_free(param_table *t);
const param_info *param_find(const param_table *t, const char *name);
/* Accepts ESPnet2/ESPnet3 spellings of a name: "model." prefix, older "encoder.embed.out.0.*". */
const param_info *param_find_alias(const param_table *t, const char *name);

/* Initializes the flat buffer: init NULL = PyTorch module defaults; "xavier_uniform",
 * "xavier_normal", "kaiming_uniform", "kaiming_normal" as espnet2.torch_utils.initialize
 * (weights with more than one dimension, biases zero, LayerNorm reset to 1/0, Embedding reset to
 * N(0, 1)). Seeded. */
int param_init(float *params, const param_table *t, const char *init, uint64_t seed, esp_err *err);

#endif
