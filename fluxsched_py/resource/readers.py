"""The :class:`~fluxsched_py.resource.graph.ResourceGraph` constructors
that build its model with one reader each (R, JGF, GRUG, recipe, hwloc, or
any file by its format), kept apart from the graph's state.

Each reader returns an ``nx.DiGraph`` (:mod:`.builder`) and never imports
the graph; these class methods hand it to the graph's constructor.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["GraphReaders"]

G = TypeVar("G", bound="GraphReaders")


class GraphReaders:
    """Class methods of :class:`~fluxsched_py.resource.graph.ResourceGraph`:
    a graph from a file or document in each supported format."""

    __slots__ = ()

    @classmethod
    def from_rv1(cls: type[G], R: dict | str | Path, *, source: str | None = None) -> G:
        """Build from RFC 20 R version 1 (a dict, or a path to a JSON file).

        ``R_lite``, ``nodelist`` and ``properties`` give ranks, cores, GPUs,
        host names and properties.  When ``scheduling`` carries JGF, the graph
        is built from it and R's host names and properties are laid over it.
        """
        from .rv1 import model_from_rv1

        return cls(model_from_rv1(R, source=source))

    @classmethod
    def from_nodes(cls: type[G], hostnames: list[str], cores: int = 1) -> G:
        """A cluster of identical nodes, one rank per host name in order,
        ``cores`` cores each: the graph :meth:`from_rv1` makes of
        ``Topology.uniform_rv1(hostnames, cores)``, built without its
        networkx model (made when first asked for), so a machine of 200,000
        nodes loads in about a second."""
        from .topology import Topology

        return cls(Topology.uniform(list(hostnames), cores))

    @classmethod
    def from_jgf(cls: type[G], jgf: dict | str | Path, *, source: str | None = None) -> G:
        """Build from JSON Graph Format as Fluxion writes it (``{"graph": {nodes, edges}}``)."""
        from .jgf import model_from_jgf

        return cls(model_from_jgf(jgf, source=source))

    @classmethod
    def from_grug(cls: type[G], path: str | Path) -> G:
        """Build from a Fluxion GRUG GraphML generation recipe."""
        from .grug import model_from_grug

        return cls(model_from_grug(path))

    @classmethod
    def from_recipe(cls: type[G], recipe: dict | str | Path) -> G:
        """Build from the project's YAML recipe (a dict, or a path to a YAML file)."""
        from .recipe import model_from_recipe

        return cls(model_from_recipe(recipe))

    @classmethod
    def from_hwloc(
        cls: type[G],
        paths: str | Path | Sequence[str | Path],
        *,
        ranks: int | Sequence[int] | None = None,
        hostnames: str | Sequence[str] | None = None,
        memory: bool = False,
    ) -> G:
        """Build from hwloc XML (v1 or v2): one file per node, rank 0.. in list order.

        Packages become sockets, cores and GPUs are numbered as flux-core
        numbers them; see :mod:`fluxsched_py.resource.hwloc`.
        """
        from .hwloc import model_from_hwloc

        return cls(model_from_hwloc(paths, ranks=ranks, hostnames=hostnames, memory=memory))

    @classmethod
    def load(cls, path: str | Path, format: str | None = None) -> Any:
        """Load any supported file, sniffing the format from the extension and content."""
        from .load import load_graph

        return load_graph(path, format=format)
