#!/bin/bash
# Stage 5 (train) on one GPU, then stage 6 (decode) on it. Copy this file, edit the #SBATCH lines,
# CONFIG and INFERENCE_CONFIG, then: sbatch train_gpu_one.sh [key.path=value ...]
# Needs an espnet3 built with `make CUDA=1`. One task, one GPU: trainer.accelerator gpu opens the
# CUDA backend on it; without a visible GPU the run stops at once with one error line.
#SBATCH --job-name=espnet3-gpu1
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=1
#SBATCH --cpus-per-task=8
#SBATCH --time=24:00:00
# 120 s before the time limit every task gets SIGUSR1: the ranks finish their step, write a
# checkpoint and the job requeues itself (scontrol requeue); its next start resumes there.
#SBATCH --signal=USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=espnet3-gpu1-%j.out
set -euo pipefail

CONFIG=${CONFIG:-recipes/espeak_fortunes/conf/training.yaml}
INFERENCE_CONFIG=${INFERENCE_CONFIG:-recipes/espeak_fortunes/conf/inference.yaml}
ESPNET3=${ESPNET3:-./espnet3}

# Stages 1-3 (data, tokenizer, statistics) on the CPUs, in the batch shell.
"$ESPNET3" --config "$CONFIG" --stage 1 --stop_stage 3 "$@"

export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
srun "$ESPNET3" --config "$CONFIG" --stage 5 --stop_stage 5 \
    trainer.accelerator=gpu trainer.devices=1 trainer.num_nodes=1 "$@"

# Decoding on the same GPU: model.device cuda, one worker per visible GPU (parallel.env local_gpu).
# (The overrides above are the training config's; give the decoding its own here.)
srun "$ESPNET3" --inference_config "$INFERENCE_CONFIG" --stage 6 --stop_stage 6 \
    model.device=cuda parallel.env=local_gpu
