#!/usr/bin/env python3
"""Writes test/fixtures/stream_decode/: ESPnet parity of streaming decoding (issue 43).

Run with the ESPnet venv (ESPnet 202511, torch):
    /opt/espnet3-venv/bin/python scripts/make_stream_decode_fixtures.py

  espnet_model/   a tiny ESPnet2 model with the contextual block Transformer encoder (d 32, 2 blocks,
                  block_size 16, hop_size 8, look_ahead 4), trained here for 300 steps with ESPnet's
                  own classes on make_interop_fixtures.py's synthetic tones (char tokens, global_mvn,
                  ctc_weight 0.3); ESPnet2's packed-model layout
  wav/<utt>.wav   two 16 kHz utterances of 2-4 s (longer than the training ones: several of the
                  search's blocks)
  calls.txt       ESPnet's Speech2TextStreaming (beam 4, ctc_weight 0.3 and 0.5) fed each WAV in
                  chunks: one line a call,
                    <utt> <ctc_weight> <call> <samples> <final> <blocks> <ids>|<running ids>
                  <samples>: the chunk's size; <blocks>: the search's processed_block after the
                  call; <ids>: the best hypothesis the call returned (- when none); <running ids>:
                  the best running hypothesis after the call without <sos> (- when none; the final
                  call's is -, the search is reset). Chunk sizes are seeded random, 100 to 6000
                  samples, the first shorter than a window (ESPnet then buffers it).
                  Besides, chunking "whole": the WAV in one final call.
  calls_norep.txt the same with disable_repetition_detection=True (ctc_weight 0.3 only)

With --keep-model an existing espnet_model/ is decoded again instead of trained anew. With
--encoder contextual_block_conformer the same for the contextual block Conformer (macaron, the
convolution module of kernel 7; the same block geometry) into test/fixtures/stream_decode_conformer/,
calls.txt only (the WAVs: stream_decode's).
"""
import argparse
import os
import shutil
import sys

import numpy as np
import scipy.io.wavfile
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_interop_fixtures as mi  # noqa: E402  (its stubs of optional modules come first)

from espnet2.bin.asr_inference_streaming import Speech2TextStreaming  # noqa: E402

mi.ENCODER_CONF['contextual_block_transformer'] = {
    'output_size': 32, 'attention_heads': 4, 'linear_units': 64, 'num_blocks': 2, 'dropout_rate': 0.1,
    'positional_dropout_rate': 0.1, 'attention_dropout_rate': 0.0, 'input_layer': 'conv2d',
    'normalize_before': True, 'block_size': 16, 'hop_size': 8, 'look_ahead': 4}
mi.ENCODER_CONF['contextual_block_conformer'] = dict(
    mi.ENCODER_CONF['contextual_block_transformer'], macaron_style=True, use_cnn_module=True, cnn_module_kernel=7)
TEST = {'utt1': 'ABC DEAD CAB EDA BAD', 'utt2': 'EDC BAD ACE DAB BEAD CAD EB'}


def ids_str(seq):
    return ' '.join(map(str, seq)) if len(seq) else '-'


def best_ids(ret):
    if not ret:
        return '-'
    return ids_str(ret[0][2])


def running_ids(bs):
    r = bs.running_hyps
    if r is None or len(r) == 0:
        return '-'
    return ids_str(r.yseq[0, 1:int(r.length[0])].tolist())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--keep-model', action='store_true')
    ap.add_argument('--encoder', default='contextual_block_transformer',
                    choices=('contextual_block_transformer', 'contextual_block_conformer'))
    a = ap.parse_args()
    conformer = a.encoder == 'contextual_block_conformer'
    out = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'test', 'fixtures',
                                       'stream_decode_conformer' if conformer else 'stream_decode'))
    esp = os.path.join(out, 'espnet_model')
    keep = a.keep_model and os.path.isdir(esp)
    wavdir = os.path.join(os.path.dirname(out), 'stream_decode', 'wav')  # the Conformer's share them
    if not keep:
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(wavdir, exist_ok=True)
    torch.set_num_threads(1)
    rng = np.random.default_rng(23)
    wavs = {}
    for utt, text in TEST.items():
        w = mi.synth(text, rng)
        scipy.io.wavfile.write(os.path.join(wavdir, utt + '.wav'), mi.FS, w)
        wavs[utt] = torch.from_numpy(w.astype(np.float32) / 32768)
    if not keep:
        mi.train_espnet_model(esp, np.random.default_rng(3), a.encoder)
    files = (('calls.txt', ((0.3, False), (0.5, False))), ('calls_norep.txt', ((0.3, True),)))
    for name, runs in files[:1] if conformer else files:
        lines = decode_calls(esp, wavs, runs)
        with open(os.path.join(out, name), 'w', encoding='utf-8') as f:
            f.write('\n'.join(lines) + '\n')


def decode_calls(esp, wavs, runs):
    lines = []
    crng = np.random.default_rng(5)
    cwd = os.getcwd()
    os.chdir(esp)
    try:
        for cw, norep in runs:
            s2t = Speech2TextStreaming('exp/asr_train/config.yaml', 'exp/asr_train/valid.acc.ave.pth', device='cpu',
                                       beam_size=4, ctc_weight=cw, lm_weight=0.0, penalty=0.0, nbest=1,
                                       disable_repetition_detection=norep)
            for utt, x in wavs.items():
                sizes = [int(crng.integers(100, 390))]
                while sum(sizes) < len(x):
                    sizes.append(int(crng.integers(100, 6000)))
                sizes[-1] = len(x) - sum(sizes[:-1])
                at = 0
                for k, n in enumerate(sizes):
                    final = k == len(sizes) - 1
                    ret = s2t(x[at:at + n], is_final=final)
                    at += n
                    blocks = s2t.beam_search.processed_block
                    run = '-' if final else running_ids(s2t.beam_search)
                    lines.append('%s %.1f %d %d %d %d %s|%s' % (utt, cw, k, n, int(final), blocks, best_ids(ret), run))
                ret = s2t(x, is_final=True)
                lines.append('%s %.1f whole %d 1 0 %s|-' % (utt, cw, len(x), best_ids(ret)))
                print(utt, cw, 'final', lines[-2].split(' ', 6)[-1], 'whole', best_ids(ret),
                      '(', ret[0][0] if ret else '', ')')
    finally:
        os.chdir(cwd)
    return lines


if __name__ == '__main__':
    main()
