"""swell: realistic, responsive background traffic for network experiments.

The import name is ``swell``. The core package (this folder) holds what every
stage shares: the CLI, the error type, atomic file writing, progress display
and the lookup of the native (Rust) artefacts. Each pipeline stage is its own
top-level folder mapped under this name by ``pyproject.toml``::

    extract/     -> swell.extract      traces in, models out
    topologies/  -> swell.topologies   dumbbell spec, layout, link emulation
    generators/  -> swell.generators   background and foreground traffic
    analysis/    -> swell.analysis     time series, energy plots, metrics
    experiments/ -> swell.experiments  experiment files, runner, report
"""

__version__ = "0.1.0"

import os as _os

# OpenBLAS starts one busy-waiting thread per core when numpy is imported and spins
# them after every BLAS call. swell does no heavy linear algebra, and its own
# threads (trace reader and connection tracker, link engine, generators) need
# those cores: one BLAS thread, unless the user chose otherwise. Must run before
# numpy is first imported.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
