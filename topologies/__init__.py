"""swell.topologies: the dumbbell spec, its layout and its link emulation.

``spec`` is pure data (pydantic); layout backends build it (Mininet locally);
shaping engines emulate each emulated host's access link and the bottleneck
(tc htb+netem where the kernel has netem, the native ``swell-link`` engine in
``native/`` everywhere else).
"""
