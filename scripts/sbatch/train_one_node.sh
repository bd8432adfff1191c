#!/bin/bash
# Stage 5 (train) on one node, one rank per SLURM task. Copy this file, edit the #SBATCH lines and
# CONFIG, then: sbatch train_one_node.sh [key.path=value ...]   (overrides go to every stage)
# The ranks come from PMIx (srun --mpi=pmix); on a cluster without it use --mpi=none and espnet3
# reads SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/SLURM_NODEID instead.
#SBATCH --job-name=espnet3-train
#SBATCH --nodes=1
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

# Stages 1-3 once, in the batch shell (a plain process: the batch shell is not an srun step).
"$ESPNET3" --config "$CONFIG" --stage 1 --stop_stage 3 "$@"

# One rank per task; each rank uses its task's CPUs.
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
srun --mpi=pmix "$ESPNET3" --config "$CONFIG" --stage 5 --stop_stage 5 \
    trainer.devices="$SLURM_NTASKS_PER_NODE" trainer.num_nodes=1 "$@"
