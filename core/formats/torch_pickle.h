/* The pickle inside a PyTorch checkpoint (archive/data.pkl of torch.save's zip), read by a small
 * strict interpreter of the opcodes that state dicts use (protocol 2, as torch.save writes):
 * containers, strings, numbers, bytes, the memo, persistent storage references, and GLOBAL/REDUCE
 * of collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter and the typed
 * storages (torch.FloatStorage, HalfStorage, BFloat16Storage, DoubleStorage, LongStorage,
 * IntStorage). Nothing is ever called or imported: a checkpoint from elsewhere is untrusted input.
 * Any other class (GLOBAL, then REDUCE, NEWOBJ, BUILD, SETITEMS: a numpy scalar in ESPnet2's
 * reporter, an OmegaConf DictConfig in Lightning's hyper-parameters, os.system in a hostile file)
 * becomes an opaque object that is only named, an error where the state dict needs a tensor; any
 * other opcode is an error naming it.
 *
 * The result is the state dict's tensors (plain state dict, ESPnet's checkpoint.pth `model`, or a
 * Lightning .ckpt's `state_dict`), each a view (offset, shape, stride) of a storage named by its
 * key in archive/data/. core/formats/torch_zip.h reads the storages. */
#ifndef ESPNET3_TORCH_PICKLE_H
#define ESPNET3_TORCH_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"

enum { PT_MAX_DIMS = 8 };

typedef enum pt_dtype { PT_F32, PT_F16, PT_BF16, PT_F64, PT_I64, PT_I32 } pt_dtype;

typedef struct pt_view {
    char *name;            /* the state-dict key */
    char *storage;         /* archive/data/<storage> */
    pt_dtype dtype;
    int64_t storage_numel; /* elements the storage holds (from its persistent id) */
    int64_t offset;        /* in elements */
    int ndim;
    int64_t shape[PT_MAX_DIMS];
    int64_t stride[PT_MAX_DIMS];
} pt_view;

typedef struct pt_views {
    pt_view *v;
    size_t n;
} pt_views;

size_t pt_dtype_size(pt_dtype t);
const char *pt_dtype_name(pt_dtype t);

/* Interprets the pickle (len bytes) and returns the state dict's tensor views; `what` names the
 * file in messages. Each view is checked to lie inside its storage's declared size. */
int pt_pickle_state_dict(const unsigned char *pkl, size_t len, const char *what, pt_views *out, esp_err *err);
void pt_views_free(pt_views *v);

/* A number inside the pickle (int, bool or float), named by its path as pt_pickle_tree names it. */
typedef struct pt_scalar {
    char *name;
    int is_int;  /* int or bool: i; float: f only */
    int64_t i;
    double f;
} pt_scalar;

typedef struct pt_scalars {
    pt_scalar *v;
    size_t n;
} pt_scalars;

/* Limits of pt_pickle_tree against a hostile pickle (a container shared over and over through the
 * memo, deep nesting, long names). A Lightning checkpoint of an ESPnet model has ~10^4 values. */
enum { PT_TREE_MAX_VALUES = 1 << 22, PT_TREE_MAX_DEPTH = 32, PT_TREE_MAX_PATH = 1024 };

/* The whole pickle (a dict at the top, as torch.save of a Lightning or ESPnet2 checkpoint holds) as
 * named leaves: every tensor and every number, named by its path of dict keys (str or int) and
 * list/tuple positions joined with '.' ("state_dict.model.encoder.embed.0.weight",
 * "optimizer_states.0.state.3.exp_avg", "lr_schedulers.0.last_epoch"). Strings, None and objects
 * of other classes are left out. For resuming from another trainer's checkpoint. */
int pt_pickle_tree(const unsigned char *pkl, size_t len, const char *what, pt_views *tensors, pt_scalars *scalars,
                   esp_err *err);
void pt_scalars_free(pt_scalars *s);
/* The number named `name`, or NULL. */
const pt_scalar *pt_scalar_get(const pt_scalars *s, const char *name);

/* The pickle torch.save writes for an OrderedDict of contiguous tensors: entry i is a view of all
 * of storage "<i>" (dtypes[i]: PT_F32, PT_F64 or PT_I64). Returns a malloc'd buffer of *len bytes. */
unsigned char *pt_pickle_write(const char *const *names, const pt_dtype *dtypes, const int *ndims,
                               const int64_t (*shapes)[PT_MAX_DIMS], size_t n, size_t *len);

/* The Lightning version a written .ckpt names (Lightning reads it to migrate old checkpoints). */
#define PT_LIGHTNING_VERSION "2.5.0"
/* The same state dict inside a Lightning checkpoint's dict: {"epoch", "global_step",
 * "pytorch-lightning_version", "state_dict"} (what ModelCheckpoint(save_weights_only=True) saves). */
unsigned char *pt_pickle_write_lightning(const char *const *names, const pt_dtype *dtypes, const int *ndims,
                                         const int64_t (*shapes)[PT_MAX_DIMS], size_t n, int64_t epoch,
                                         int64_t global_step, size_t *len);

#endif
