"""Conformance of a device against PyTorch's OpInfo database (op_db): every
OpInfo, every dtype it supports on the CPU, its sample inputs run on the
device and on the CPU and compared (values and gradients).  See run.py."""
