#!/bin/bash
# Stage 5 (train) on the GPUs of several nodes: one rank per GPU, NCCL between all of them (NVLink
# inside a node, InfiniBand or TCP between nodes, as NCCL finds them). Copy this file, edit the
# #SBATCH lines and CONFIG, then: sbatch train_gpu_multi_node.sh [key.path=value ...]
# Needs an espnet3 built with `make CUDA=1`. Rank 0 runs on the first host of the step and serves
# the rendezvous (NCCL's unique id goes through it) on MASTER_PORT (default: 15000 + the last 4
# digits of the job id); set MASTER_ADDR when SLURM's node names do not resolve to an address the
# other nodes reach, and NCCL_SOCKET_IFNAME / NCCL_IB_HCA when NCCL picks the wrong interface.
# A rank that dies ends the others within trainer.dist_timeout seconds (ncclCommAbort).
#SBATCH --job-name=espnet3-gpumulti
#SBATCH --nodes=2
#SBATCH --gpus-per-node=4
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=24:00:00
# 120 s before the time limit every task gets SIGUSR1: the ranks finish their step, write a
# checkpoint and the job requeues itself (scontrol requeue); its next start resumes there.
#SBATCH --signal=USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=espnet3-gpumulti-%j.out
set -euo pipefail

CONFIG=${CONFIG:-recipes/espeak_fortunes/conf/training.yaml}
ESPNET3=${ESPNET3:-./espnet3}
GPUS=${SLURM_GPUS_PER_NODE##*:} # "4", or "a100:4" with a GPU type

"$ESPNET3" --config "$CONFIG" --stage 1 --stop_stage 3 "$@"

export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
srun --mpi=pmix "$ESPNET3" --config "$CONFIG" --stage 5 --stop_stage 5 \
    trainer.accelerator=gpu trainer.devices="$GPUS" trainer.num_nodes="$SLURM_JOB_NUM_NODES" "$@"
