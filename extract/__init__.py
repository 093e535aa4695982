"""swell.extract: traces in, models out.

Streaming trace reader (Rust core in ``native/``, loaded with ctypes),
connection and flow reconstruction, and the model fitting of DESIGN 2
(Swing users/applications/network), with the versioned model directory format
and the variants that transform a model.
"""
