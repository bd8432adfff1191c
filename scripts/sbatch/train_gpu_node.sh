#!/bin/bash
# Stage 5 (train) on the GPUs of one node: one rank per GPU (DDP, or trainer.strategy=fsdp), the
# gradients all-reduced by NCCL. Copy this file, edit the #SBATCH lines and CONFIG, then:
#   sbatch train_gpu_node.sh [key.path=value ...]
# Needs an espnet3 built with `make CUDA=1` (NCCL included). --ntasks-per-node must equal the GPUs
# per node: each task is a rank and uses GPU <local rank> of the node (or its own one GPU when the
# cluster binds a GPU per task, e.g. --gpus-per-task=1).
#SBATCH --job-name=espnet3-gpunode
#SBATCH --nodes=1
#SBATCH --gpus-per-node=4
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=24:00:00
# 120 s before the time limit every task gets SIGUSR1: the ranks finish their step, write a
# checkpoint and the job requeues itself (scontrol requeue); its next start resumes there.
#SBATCH --signal=USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=espnet3-gpunode-%j.out
set -euo pipefail

CONFIG=${CONFIG:-recipes/espeak_fortunes/conf/training.yaml}
ESPNET3=${ESPNET3:-./espnet3}
GPUS=${SLURM_GPUS_PER_NODE##*:} # "4", or "a100:4" with a GPU type

"$ESPNET3" --config "$CONFIG" --stage 1 --stop_stage 3 "$@"

export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
srun --mpi=pmix "$ESPNET3" --config "$CONFIG" --stage 5 --stop_stage 5 \
    trainer.accelerator=gpu trainer.devices="$GPUS" trainer.num_nodes=1 "$@"
