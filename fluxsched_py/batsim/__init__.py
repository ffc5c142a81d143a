"""Batsim decision-process drivers.

Each protocol module is a sans-I/O codec: it turns bytes from Batsim into
plain event objects and decisions back into bytes, and knows nothing about
sockets or scheduling.  ``driver`` binds the shared scheduling engine to a
codec; ``cli`` adds the ZeroMQ / Unix-socket I/O (pyzmq is imported there
only).

* :mod:`.v4` — Batsim 3/4 JSON protocol (the main target);
* :mod:`.batprotocol` — Batsim 5 batprotocol, JSON mode;
* :mod:`.legacy` — the old length-prefixed text protocol.
"""
