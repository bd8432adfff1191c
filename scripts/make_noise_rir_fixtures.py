#!/opt/espnet3-venv/bin/python
"""Writes the reverberation / additive noise parity fixtures under test/fixtures/noise_rir/.

A 1.5 s test signal (tones with silent gaps and seeded noise) goes through ESPnet2's own
CommonPreprocessor._convolve_rir and ._add_noise (espnet2/train/preprocessor.py) with a fixed RIR
(an exponentially decaying seeded noise) and two noises (shorter than the speech: wrapped around an
offset; longer: a window at an offset). numpy's draws (which RIR, SNR, offset) are replaced by
fixed values, which the C test passes to core/data/noise_rir.c's parts. Written as raw
little-endian float32 (the inputs are float32 values, the outputs rounded): speech, rir, noise_short, noise_long, mask (detect_non_silence as 0/1),
out_rir, out_noise_short, out_noise_long, out_both (rir then noise_long, then ESPnet's peak
normalization), and params.txt (power, SNRs, offsets).

    /opt/espnet3-venv/bin/python scripts/make_noise_rir_fixtures.py [outdir]
"""
import os
import sys
from unittest import mock

import types

import numpy as np
import soundfile

# The preprocessor module imports text cleaners and phoneme tokenizers whose packages the venv may
# lack (g2p_en, jamo, tacotron_cleaner...); the functions used here do not touch them: stub them.
class _Stub(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Stub(self.__name__ + "." + attr)


for _ in range(50):
    try:
        import espnet2.train.preprocessor  # noqa: F401
        break
    except ModuleNotFoundError as e:
        parts = e.name.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name not in sys.modules:
                m = _Stub(name)
                m.__path__ = []
                sys.modules[name] = m
                if i > 1:
                    setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], m)
from espnet2.train.preprocessor import CommonPreprocessor, detect_non_silence

out = sys.argv[1] if len(sys.argv) > 1 else "test/fixtures/noise_rir"
os.makedirs(out, exist_ok=True)
FS = 16000
N = 12000
rs = np.random.RandomState(7)
t = np.arange(N) / FS
speech = 0.5 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 1330 * t) + 0.05 * rs.randn(N)
speech[3000:5000] = 0.0005 * rs.randn(2000)  # a near-silent gap
speech[10000:] *= 0.001
rir = rs.randn(2000) * np.exp(-np.arange(2000) / 300.0)
rir[0] = 1.0
noise_short = rs.randn(4001) * 0.3 + np.sin(np.arange(4001) * 0.01)
noise_long = np.cumsum(rs.randn(16000)) * 0.01
noise_long -= noise_long.mean()
speech = speech.astype(np.float32).astype(np.float64)  # stored as float32: the test reads the same values

tmp = os.path.join(out, "_tmp")
os.makedirs(tmp, exist_ok=True)
paths = {}
for name, x in [("rir", rir), ("noise_short", noise_short), ("noise_long", noise_long)]:
    p = os.path.join(tmp, name + ".wav")
    soundfile.write(p, x / 4 if name == "rir" else x / 8, FS, subtype="FLOAT")
    paths[name] = p

pre = CommonPreprocessor(train=True)
pre.short_noise_thres = 0.5
sp = speech[None, :]
mask = detect_non_silence(sp)
power = (sp[mask] ** 2).mean()


def run_rir():
    with mock.patch("numpy.random.choice", lambda a: paths["rir"]):
        y, _ = pre._convolve_rir(sp.copy(), power, [paths["rir"]])
    return y


def run_noise(name, db, offset):
    with mock.patch("numpy.random.choice", lambda a: paths[name]), \
         mock.patch("numpy.random.uniform", lambda lo, hi: db), \
         mock.patch("numpy.random.randint", lambda lo, hi: offset):
        y, _ = pre._add_noise(sp.copy(), power, [paths[name]], db, db)
    return y


out_rir = run_rir()
out_ns = run_noise("noise_short", 5.0, 1234)
out_nl = run_noise("noise_long", 12.5, 2345)
# both: rir, then the long noise on the reverberant speech, then the peak normalization
with mock.patch("numpy.random.choice", lambda a: paths["noise_long"]), \
     mock.patch("numpy.random.uniform", lambda lo, hi: -3.0), \
     mock.patch("numpy.random.randint", lambda lo, hi: 3333):
    both, _ = pre._add_noise(out_rir.copy(), power, [paths["noise_long"]], -3.0, -3.0)
both = both.T
ma = np.max(np.abs(both))
if ma > 1.0:
    both /= ma

for name, x in [("speech", speech), ("rir", soundfile.read(paths["rir"])[0]),
                ("noise_short", soundfile.read(paths["noise_short"])[0]),
                ("noise_long", soundfile.read(paths["noise_long"])[0]), ("mask", mask[0].astype(np.float64)),
                ("out_rir", out_rir[0]), ("out_noise_short", out_ns[0]), ("out_noise_long", out_nl[0]),
                ("out_both", both[:, 0])]:
    np.asarray(x, dtype="<f4").tofile(os.path.join(out, name + ".f32"))
with open(os.path.join(out, "params.txt"), "w") as f:
    f.write("%.17g 5.0 1234 12.5 2345 -3.0 3333 %.17g\n" % (power, ma))
for p in paths.values():
    os.remove(p)
os.rmdir(tmp)
print("wrote", out, "power", power, "peak", ma)
