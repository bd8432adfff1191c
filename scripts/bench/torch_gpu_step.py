"""The GPU peer of scripts/bench/gpu_step: the reference Transformer-CTC (asr_ctc_ref.py, plain
PyTorch) training step on the GPU, FP32 with TF32 off (cuBLAS runs espnet3's GEMMs in FP32), batch
16 x 400 frames x 80 with 50 labels, forward + CTC + backward + Adam, CUDA synchronized around each
step: median and min of 20 steps after 5.
    python3 scripts/bench/torch_gpu_step.py path/to/asr_ctc_ref.py"""
import importlib.util
import statistics
import sys
import time

import torch

spec = importlib.util.spec_from_file_location('asr_ctc_ref', sys.argv[1])
R = importlib.util.module_from_spec(spec)
spec.loader.exec_module(R)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
feats, lens, ys, ylens = (t.cuda() for t in R.make_batch(16, 400, 50))
torch.set_default_device('cuda')  # the reference model makes its masks with torch.arange
model = R.TransformerCTC()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
times = []
for i in range(25):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    loss = model.loss(feats, lens, ys, ylens)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    if i >= 5:
        times.append(time.perf_counter() - t0)
print(f'ms {statistics.median(times) * 1e3:.2f} min {min(times) * 1e3:.2f} loss {loss.item():.3f} '
      f'torch {torch.__version__} device {torch.cuda.get_device_name()}')
