"""Hybrid backfilling: conservative up to a reservation depth.

The first ``reserve-depth`` jobs that cannot start get reservations exactly
as in conservative backfilling; the jobs behind them only start when they fit
now without delaying any of those reservations.  ``reserve-depth=1`` behaves
like EASY without the extra-nodes re-planning; unlimited depth is
conservative.  The default depth, 64, is Fluxion's ``hybrid`` default.

Load with ``queue-policy=hybrid reserve-depth=N``.

Reference:
    Ahuva W. Mu'alem and Dror G. Feitelson, "Utilization, Predictability,
    Workloads, and User Runtime Estimates in Scheduling the IBM SP2 with
    Backfilling", IEEE TPDS 12(6):529-543, 2001 (conservative backfilling;
    the bounded depth follows Fluxion's queue policies).
"""

from __future__ import annotations

from .conservative import ConservativePolicy


class HybridPolicy(ConservativePolicy):
    """Conservative backfilling with a bounded reservation depth (inherits :meth:`run`)."""

    name = "hybrid"
    default_reserve_depth = 64
