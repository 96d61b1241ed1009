"""Executors that run a campaign's tasks (``campaign/tasks.py``): ``local`` on the cores
of this machine, ``ray`` on a Ray cluster. Kubernetes Indexed Jobs and Slurm arrays need
no executor of ours: each index runs ``evstore campaign work NAME --shard I/N``
(``docs/scale.md``)."""
