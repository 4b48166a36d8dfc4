"""``torch_neuronx.profiler``: a picture of a ``torch.profiler`` trace.

The device side of profiling lives in torch.profiler itself (the neuron
Kineto plugin, torch_neuronx/csrc/profiler.cpp): profile with
``activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]`` and
``export_chrome_trace`` writes CPU ops, device tasks (one lane per device
stream) and, with ``profile_memory=True``, device memory events.  This
package turns such a trace into one self-contained HTML file::

    python -m torch_neuronx.profiler report TRACE.json -o report.html

or ``torch_neuronx.profiler.report("TRACE.json", "report.html")``.  The file
needs no network: a zoomable timeline of the CPU threads and device streams,
the top ops by device time, CPU fallbacks highlighted, and device memory
over time.
"""
from torch_neuronx.profiler._report import load_trace, report, summarize

__all__ = ["report", "load_trace", "summarize"]
