#!/bin/bash
# Stage 5 (train) across several nodes, one rank per SLURM task. Copy this file, edit the
# #SBATCH lines and CONFIG, then: sbatch train_multi_node.sh [key.path=value ...]
# Rank 0 runs on the first host of the step (SLURM_STEP_NODELIST) and serves the rendezvous on
# MASTER_PORT (default: 15000 + the last 4 digits of the job id). Set MASTER_ADDR when the node
# names SLURM uses do not resolve to an address the other nodes reach; MASTER_PORT to pick the port.
# Ranks of one node share memory; nodes talk TCP. Stages 1-3 write to the shared file system.
#SBATCH --job-name=espnet3-train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=4
#SBATCH --time=24:00:00
# 120 s before the time limit every task gets SIGUSR1: the ranks finish their step, write a
# checkpoint and the job requeues itself (scontrol requeue); its next start resumes there.
#SBATCH --signal=USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=espnet3-train-%j.out
set -euo pipefail

CONFIG=${CONFIG:-recipes/espeak_fortunes/conf/training.yaml}
ESPNET3=${ESPNET3:-./espnet3}

"$ESPNET3" --config "$CONFIG" --stage 1 --stop_stage 3 "$@"

export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
srun --mpi=pmix "$ESPNET3" --config "$CONFIG" --stage 5 --stop_stage 5 \
    trainer.devices="$SLURM_NTASKS_PER_NODE" trainer.num_nodes="$SLURM_JOB_NUM_NODES" "$@"
