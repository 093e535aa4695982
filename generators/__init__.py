"""swell.generators: background and foreground traffic behind one interface.

Every generator (Swing closed loop, CBR, Poisson, playback, tcpreplay, ...)
implements the same small interface and is listed in an explicit registry.
The hot path (many concurrent TCP/UDP sessions) is the native ``swell-gen``
program in ``native/``.
"""
