/* PyTorch checkpoint files: the zip that torch.save writes (archive/data.pkl, archive/data/<key>
 * storages, archive/byteorder, archive/version; entries stored uncompressed), read with libzip and
 * core/formats/torch_pickle.h's strict pickle reader, and written the same way for torch.load.
 *
 * Read: a plain state dict (ESPnet's valid.acc.ave_10best.pth), ESPnet2's trainer checkpoint.pth
 * (its `model`), or a Lightning .ckpt (its `state_dict`; names keep their `model.` prefix). Every
 * tensor comes back contiguous as a st_file (core/formats/safetensors.h): floating dtypes (float32,
 * float16, bfloat16, float64) as F32, integer ones (int64, int32) as I64; shared storages and
 * strided views are resolved. Hostile input (code in the pickle, views past their storage,
 * truncated or compressed entries, sizes past the file) is refused with one line. */
#ifndef ESPNET3_TORCH_ZIP_H
#define ESPNET3_TORCH_ZIP_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/formats/safetensors.h"
#include "core/formats/torch_pickle.h"

/* 1 when the file starts as a zip (what torch.save writes), 0 otherwise (or unreadable). */
int pt_is_zip_file(const char *path);

/* 1 when the file is torch.save's legacy format (before PyTorch 1.6, or
 * _use_new_zipfile_serialization=False): a pickle stream with raw storages after it, not read. */
int pt_is_legacy_file(const char *path);

int pt_read(const char *path, st_file *out, esp_err *err);
/* The same from memory (the fuzz target); `what` names it in messages. */
int pt_read_mem(const void *buf, size_t len, const char *what, st_file *out, esp_err *err);

/* Every tensor and number of a checkpoint's pickle, named by its path (pt_pickle_tree in
 * core/formats/torch_pickle.h): a Lightning .ckpt's state_dict, optimizer_states, lr_schedulers,
 * epoch, global_step and loops, for resuming from it. Tensors as pt_read gives them. */
int pt_read_tree(const char *path, st_file *tensors, pt_scalars *scalars, esp_err *err);
int pt_read_tree_mem(const void *buf, size_t len, const char *what, st_file *tensors, pt_scalars *scalars,
                     esp_err *err);

/* Writes F32, F64 and I64 tensors as an OrderedDict state dict that torch.load (weights_only too)
 * reads, atomically (temp + fsync + rename). Deterministic bytes for the same tensors. */
int pt_write(const char *path, const st_tensor *tensors, size_t n, esp_err *err);
/* The same inside a Lightning checkpoint (a .ckpt: {"epoch", "global_step",
 * "pytorch-lightning_version", "state_dict"}, names prefixed "model." as ESPnet3's LightningModule
 * holds them), the weights-only form ESPnet3's best-k ModelCheckpoint saves. */
int pt_write_lightning(const char *path, const st_tensor *tensors, size_t n, int64_t epoch, int64_t global_step,
                       esp_err *err);

#endif
