"""fluxsched-py: a Python resource-allocation scheduler for Flux.

The scheduling core (ids, jobspec, resource, match, planner, policy, engine)
is plain Python with no Flux, ZMQ or clock dependency.  Drivers for the Flux
broker, the Batsim simulator and offline trace replay sit on top of it.
"""

__version__ = "0.1.0"
