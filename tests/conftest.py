"""Tiny models are fastest with one torch thread per process; test workers and
notebook kernels inherit this before they import torch."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
