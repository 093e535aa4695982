"""swell.analysis: pure functions over arrays.

Time series, wavelet energy plots (Abry-Veitch log-scale diagrams),
comparisons with their first-half/second-half floor, application metrics
(response-time CDFs, slowdown, jitter) and the plots drawn from them.
"""
