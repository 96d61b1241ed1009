#!/bin/sh
# A campaign's validation as a Slurm job array: 4 tasks, each computing one shard of the
# tasks (`evstore campaign tasks NAME`) and publishing every result to the remote.
# Submit from a clone of the evidence repository at the commit to judge:
#   sbatch docs/scale/slurm-array.sh
#SBATCH --job-name=evstore-work
#SBATCH --array=0-3
#SBATCH --cpus-per-task=4
#SBATCH --requeue
set -eu
evstore campaign work video-lossless --shard $SLURM_ARRAY_TASK_ID/4 --jobs 4 --sign "$HOME/.evstore/worker" --root "${SLURM_SUBMIT_DIR:-.}"
