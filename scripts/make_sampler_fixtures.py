#!/usr/bin/python3
"""Writes the batch sampler fixtures under test/fixtures/sampler/.

The samplers below are ESPnet2's, ported line for line (espnet can not be installed here) from
espnet/espnet at these files (newest forms):
  espnet2/samplers/num_elements_batch_sampler.py   NumElementsBatchSampler.__init__
  espnet2/samplers/length_batch_sampler.py         LengthBatchSampler.__init__
  espnet2/samplers/sorted_batch_sampler.py         SortedBatchSampler.__init__
  espnet2/samplers/unsorted_batch_sampler.py       UnsortedBatchSampler.__init__
  espnet2/fileio/read_text.py                      read_2column_text, load_num_sequence_text
  espnet2/iterators/sequence_iter_factory.py       np.random.RandomState(epoch + seed).shuffle
  espnet3/components/data/dataloader.py            tail drop + batches[rank::world_size],
                                                   build_iter(epoch + 1)
The epoch shuffle runs numpy itself, so the C port of numpy's MT19937 shuffle is checked against
the real thing.

Files written:
  *.shape            shape files ("uid d1,d2,...")
  cases.txt          name type batch_size batch_bins min_batch_size sort_in_batch sort_batch
                     drop_last padding shape_file[,shape_file...]
  <name>.batches     one batch a line, uids separated by spaces
  shuffle.txt        n seed perm... (np.random.RandomState(seed).shuffle(list(range(n))))
  plans.txt          case world_size rank seed epoch0 batch_index... (ESPnet3's per-rank order)

Run with Debian's python3 (numpy):  /usr/bin/python3 scripts/make_sampler_fixtures.py [outdir]
"""
import os
import sys

import numpy as np


# ---- espnet2/fileio/read_text.py -------------------------------------------------------------
def read_2column_text(path):
    data = {}
    with open(path, "r", encoding="utf-8") as f:
        for linenum, line in enumerate(f, 1):
            sps = line.rstrip().split(maxsplit=1)
            if len(sps) != 2:
                raise RuntimeError(f"scp file must have two or more columns: {line} ({path}:{linenum})")
            k, v = sps
            if k in data:
                raise RuntimeError(f"{k} is duplicated ({path}:{linenum})")
            data[k] = v.rstrip()
    return data


def load_num_sequence_text(path):
    return {k: [int(i) for i in v.split(",")] for k, v in read_2column_text(path).items()}


# ---- numel and length (num_elements_batch_sampler.py, length_batch_sampler.py) ---------------
def bins_sampler(numel, batch_bins, shape_files, min_batch_size=1, sort_in_batch="descending",
                 sort_batch="ascending", drop_last=False, padding=True):
    assert batch_bins > 0
    utt2shapes = [load_num_sequence_text(s) for s in shape_files]
    first_utt2shape = utt2shapes[0]
    for s, d in zip(shape_files, utt2shapes):
        if set(d) != set(first_utt2shape):
            raise RuntimeError(f"keys are mismatched between {s} != {shape_files[0]}")
    keys = sorted(first_utt2shape, key=lambda k: first_utt2shape[k][0])
    if len(keys) == 0:
        raise RuntimeError(f"0 lines found: {shape_files[0]}")
    if numel and padding:
        feat_dims = [np.prod(d[keys[0]][1:]) for d in utt2shapes]
    else:
        feat_dims = None

    batch_sizes = []
    current_batch_keys = []
    for key in keys:
        current_batch_keys.append(key)
        if numel:
            if padding:
                for d, s in zip(utt2shapes, shape_files):
                    if tuple(d[key][1:]) != tuple(d[keys[0]][1:]):
                        raise RuntimeError(f"If padding=True, the feature dimension must be unified: {s}")
                bins = sum(len(current_batch_keys) * sh[key][0] * d for sh, d in zip(utt2shapes, feat_dims))
            else:
                bins = sum(np.prod(d[k]) for k in current_batch_keys for d in utt2shapes)
        else:
            if padding:
                bins = sum(len(current_batch_keys) * sh[key][0] for sh in utt2shapes)
            else:
                bins = sum(d[k][0] for k in current_batch_keys for d in utt2shapes)
        if bins > batch_bins and len(current_batch_keys) >= min_batch_size:
            batch_sizes.append(len(current_batch_keys))
            current_batch_keys = []
    else:
        if len(current_batch_keys) != 0 and (not drop_last or len(batch_sizes) == 0):
            batch_sizes.append(len(current_batch_keys))

    if len(batch_sizes) == 0:
        raise RuntimeError("0 batches")
    if len(batch_sizes) > 1 and batch_sizes[-1] < min_batch_size:
        for i in range(batch_sizes.pop(-1)):
            batch_sizes[-(i % len(batch_sizes)) - 1] += 1
    if not drop_last:
        assert sum(batch_sizes) == len(keys), f"{sum(batch_sizes)} != {len(keys)}"

    batch_list = []
    iter_bs = iter(batch_sizes)
    bs = next(iter_bs)
    minibatch_keys = []
    for key in keys:
        minibatch_keys.append(key)
        if len(minibatch_keys) == bs:
            if sort_in_batch == "descending":
                minibatch_keys.reverse()
            batch_list.append(tuple(minibatch_keys))
            minibatch_keys = []
            try:
                bs = next(iter_bs)
            except StopIteration:
                break
    if sort_batch == "descending":
        batch_list.reverse()
    return batch_list


# ---- sorted_batch_sampler.py ---------------------------------------------------------------------
def sorted_sampler(batch_size, shape_file, sort_in_batch="descending", sort_batch="ascending", drop_last=False):
    assert batch_size > 0
    utt2shape = load_num_sequence_text(shape_file)
    if sort_in_batch == "descending":
        keys = sorted(utt2shape, key=lambda k: -utt2shape[k][0])
    else:
        keys = sorted(utt2shape, key=lambda k: utt2shape[k][0])
    if len(keys) == 0:
        raise RuntimeError(f"0 lines found: {shape_file}")
    N = max(len(keys) // batch_size, 1)
    if not drop_last:
        batch_list = [keys[i * len(keys) // N: (i + 1) * len(keys) // N] for i in range(N)]
    else:
        batch_list = [tuple(keys[i * batch_size: (i + 1) * batch_size]) for i in range(N)]
    if sort_in_batch != sort_batch:
        batch_list.reverse()
    return batch_list


# ---- unsorted_batch_sampler.py -----------------------------------------------------------------
def unsorted_sampler(batch_size, key_file, drop_last=False):
    assert batch_size > 0
    keys = list(read_2column_text(key_file))
    if len(keys) == 0:
        raise RuntimeError(f"0 lines found: {key_file}")
    N = max(len(keys) // batch_size, 1)
    if not drop_last:
        return [keys[i * len(keys) // N: (i + 1) * len(keys) // N] for i in range(N)]
    return [tuple(keys[i * batch_size: (i + 1) * batch_size]) for i in range(N)]


def build(c, out):
    files = [os.path.join(out, f) for f in c["files"]]
    if c["type"] in ("numel", "length"):
        return bins_sampler(c["type"] == "numel", c["bins"], files, c["min"], c["sib"], c["sb"], c["drop"],
                            c["pad"])
    if c["type"] == "sorted":
        return sorted_sampler(c["bs"], files[0], c["sib"], c["sb"], c["drop"])
    return unsorted_sampler(c["bs"], files[0], c["drop"])


# ---- espnet3 dataloader.py + sequence_iter_factory.py ------------------------------------------
def epoch_plan(n_batches, world_size, rank, seed, epoch0):
    batches = list(range(n_batches))
    if world_size > 1:
        remainder = len(batches) % world_size
        if remainder:
            batches = batches[: len(batches) - remainder]
        batches = batches[rank::world_size]
    np.random.RandomState(epoch0 + 1 + seed).shuffle(batches)
    return batches


def write_shape(path, rows):
    with open(path, "w") as f:
        for uid, dims in rows:
            f.write(f"{uid} {','.join(str(d) for d in dims)}\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "test/fixtures/sampler"
    os.makedirs(out, exist_ok=True)
    rs = np.random.RandomState(20240601)

    # 60 utterances, lengths from a small set so ties are common; file order is not sorted.
    uids = [f"utt{i:03d}" for i in rs.permutation(60)]
    T = {u: int(rs.choice([37, 80, 80, 123, 150, 150, 150, 222, 301, 400])) for u in uids}
    L = {u: int(rs.randint(0, 40)) for u in uids}
    write_shape(os.path.join(out, "feats.shape"), [(u, (T[u], 80)) for u in uids])
    other = list(uids)
    rs.shuffle(other)
    write_shape(os.path.join(out, "text.shape"), [(u, (L[u], 31)) for u in other])
    # 7 utterances for tails, min_batch_size and drop_last; 3-D and 1-D shapes.
    small = [("s1", 10), ("s2", 50), ("s3", 20), ("s4", 50), ("s5", 90), ("s6", 30), ("s7", 70)]
    write_shape(os.path.join(out, "small.shape"), [(u, (t, 4)) for u, t in small])
    write_shape(os.path.join(out, "cube.shape"), [(u, (t, 2, 3)) for u, t in small])
    write_shape(os.path.join(out, "len.shape"), [(u, (t,)) for u, t in small])

    def case(name, type, files, bs=0, bins=0, min=1, sib="descending", sb="ascending", drop=False, pad=True):
        return dict(name=name, type=type, files=files, bs=bs, bins=bins, min=min, sib=sib, sb=sb, drop=drop,
                    pad=pad)

    F, FT, S = ["feats.shape"], ["feats.shape", "text.shape"], ["small.shape"]
    cases = [
        case("numel_default", "numel", F, bins=100000),
        case("numel_exact_bins", "numel", F, bins=80 * 150 * 6),  # bins == batch_bins does not close
        case("numel_two_files", "numel", FT, bins=120000),
        case("numel_min3", "numel", F, bins=30000, min=3),
        case("numel_asc_desc", "numel", F, bins=90000, sib="ascending", sb="descending"),
        case("numel_drop_last", "numel", F, bins=100000, drop=True),
        case("numel_nopad", "numel", FT, bins=70000, pad=False),
        case("numel_huge", "numel", F, bins=10 ** 12),
        case("numel_tiny", "numel", F, bins=1),
        case("numel_small_min3", "numel", S, bins=600, min=3),
        case("numel_small_min3_drop", "numel", S, bins=600, min=3, drop=True),
        case("numel_cube", "numel", ["cube.shape"], bins=700),
        case("numel_len_only", "numel", ["len.shape"], bins=100),
        case("length_default", "length", F, bins=1000),
        case("length_two_files", "length", FT, bins=900),
        case("length_nopad", "length", FT, bins=700, pad=False),
        case("length_min4", "length", S, bins=100, min=4),
        case("sorted_default", "sorted", F, bs=7),
        case("sorted_asc_asc", "sorted", F, bs=8, sib="ascending"),
        case("sorted_desc_desc", "sorted", F, bs=8, sb="descending"),
        case("sorted_drop_last", "sorted", F, bs=7, drop=True),
        case("sorted_big", "sorted", S, bs=100),
        case("sorted_big_drop", "sorted", S, bs=100, drop=True),
        case("unsorted_default", "unsorted", F, bs=7),
        case("unsorted_drop_last", "unsorted", F, bs=7, drop=True),
        case("unsorted_small", "unsorted", S, bs=3),
    ]
    with open(os.path.join(out, "cases.txt"), "w") as f:
        for c in cases:
            f.write(f"{c['name']} {c['type']} {c['bs']} {c['bins']} {c['min']} {c['sib']} {c['sb']} "
                    f"{int(c['drop'])} {int(c['pad'])} {','.join(c['files'])}\n")
            with open(os.path.join(out, c["name"] + ".batches"), "w") as g:
                for b in build(c, out):
                    g.write(" ".join(b) + "\n")

    with open(os.path.join(out, "shuffle.txt"), "w") as f:
        for n, seed in [(0, 1), (1, 5), (2, 1), (5, 0), (10, 1), (10, 2), (17, 123), (100, 7), (1000, 4294967295),
                        (3000, 3)]:
            x = list(range(n))
            np.random.RandomState(seed).shuffle(x)
            f.write(f"{n} {seed} {' '.join(map(str, x))}\n")

    with open(os.path.join(out, "plans.txt"), "w") as f:
        n = len(build(cases[0], out))
        for w, r, seed, e in [(1, 0, 0, 0), (1, 0, 0, 1), (1, 0, 2024, 5), (2, 0, 0, 0), (2, 1, 0, 0), (3, 2, 7, 3),
                              (4, 1, 0, 9)]:
            f.write(f"numel_default {w} {r} {seed} {e} {' '.join(map(str, epoch_plan(n, w, r, seed, e)))}\n")


if __name__ == "__main__":
    main()
