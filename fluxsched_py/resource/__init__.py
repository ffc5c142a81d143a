"""The resource graph: readers, state, resource sets and R output.

>>> from fluxsched_py.resource import ResourceGraph
>>> g = ResourceGraph.from_recipe({"cluster": {"nodes": 4, "sockets": 2, "cores_per_socket": 4}})
>>> len(g.all().ranks), g.all().count("core")
(4, 32)
"""

from .errors import ResourceError
from .graph import ResourceGraph
from .resourceset import ResourceSet
from .state import Availability
from .topology import Topology

__all__ = ["ResourceGraph", "ResourceSet", "ResourceError", "Availability", "Topology"]
