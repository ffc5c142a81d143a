"""What a Batsim workload entry says about a job beyond its size and time.

A Batsim workload job may carry fields Batsim itself does not read; the
replay's Batsim reader (:mod:`fluxsched_py.replay.workload`) and every
Batsim driver read them here, so that a job is the same job under each:
Batsim 3/4 forwards the whole entry in JOB_SUBMITTED, the legacy
protocol's jobs come from the ``--workload`` file(s), and Batsim 5 forwards
a job's ``extra_data`` (read as a JSON object) beside its entry in the
workload file ``SimulationBeginsEvent`` names.  A job that names no user is
uid 0 under Batsim and the unknown user (-1) in the replay's records, as in
an SWF trace.

The fields: ``user`` (a uid, or a user name), ``reservation``, ``queue``,
``bank`` (an account), ``constraints`` (RFC 31, on the hosts' properties:
a platform's ``<prop id=K value=V>`` is the property ``K=V``, or ``K``
when V is empty), ``preemptible-after`` (a best-effort job),
``checkpoint`` (``"signal"``), ``campaign`` and ``campaign-type``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..ids import user_id
from ..jobspec.constraints import Constraint, ConstraintError, parse_constraint
from ..jobspec.fsd import parse_fsd
from .errors import ProtocolError

__all__ = ["MAX_UID", "EntryError", "EntryFields", "read_entry"]


class EntryError(ProtocolError):
    """A workload entry's field is malformed; the message names the job and the field.

    A subclass of :class:`~.errors.ProtocolError`, so the Batsim drivers stop
    on it as on any protocol violation, while the replay, which reads the same
    entries from a file, catches it without importing the codecs' errors.
    """


#: The largest uid (Flux's are 32-bit unsigned).
MAX_UID = 2**32 - 1


@dataclass(frozen=True, slots=True)
class EntryFields:
    """The fields of one workload entry, checked."""

    #: ``preemptible-after`` (seconds) of a best-effort job, else None.
    preemptible_after: float | None = None
    #: Its uid: the entry's ``user`` (a uid, or a name: :func:`~fluxsched_py.ids.user_id`);
    #: None when it names none (no ``user``, or SWF's unknown, -1).
    user: int | None = None
    #: The advance reservation it names, else None.
    reservation: str | None = None
    #: Its CiGri campaign and the campaign's type, "" when none.
    campaign: str = ""
    campaign_type: str = ""
    #: It checkpoints on its preemption notice (``attributes.user.checkpoint``).
    checkpoint: bool = False
    #: The bank (account) it is charged to (``attributes.system.bank``), "" when none.
    bank: str = ""
    #: The queue it is submitted to, None: the default one.
    queue: str | None = None
    #: The nodes it may run on: an RFC 31 constraint (as a Flux jobspec's
    #: ``attributes.system.constraints``) on the hosts' properties, None: any.
    constraints: Constraint | None = None

    def submission(self, *, campaigns: bool, checkpoints: bool, preemptible: bool = True) -> dict[str, Any]:
        """The keyword arguments of :meth:`~.driver.BatsimScheduler.submit` these fields give.

        ``campaigns``: the campaign reaches the engine (off, the engine sees
        none, and decides as with no campaign field); ``checkpoints``: a
        checkpointing job is requeued with its remaining work (only when the
        driver can register jobs); ``preemptible``: the driver can kill a
        job, so a best-effort job is one (the legacy protocol cannot)."""
        user: dict[str, Any] = {}
        if checkpoints and self.checkpoint:
            user["checkpoint"] = "signal"
        if campaigns and self.campaign:
            user["campaign"] = self.campaign
            if self.campaign_type:
                user["campaign-type"] = self.campaign_type
        attributes: dict[str, Any] = {"user": user} if user else {}
        if self.bank:
            attributes["system"] = {"bank": self.bank}
        return {
            "preemptible_after": self.preemptible_after if preemptible else None,
            "user": 0 if self.user is None else self.user,
            "reservation": self.reservation,
            "attributes": attributes or None,
            "queue": self.queue,
            "constraints": self.constraints,
        }


def read_entry(job_id: str, entry: Mapping[str, Any]) -> EntryFields:
    """The fields of ``entry``, job ``job_id``'s; a bad one is a
    :class:`EntryError` naming the job and the field."""
    pa = None
    if "preemptible-after" in entry:
        try:
            pa = parse_fsd(entry["preemptible-after"])
        except ValueError as exc:
            raise EntryError(f"job {job_id}: preemptible-after: {exc}") from None
    reservation = entry.get("reservation")
    if reservation is not None and (not isinstance(reservation, str) or not reservation):
        raise EntryError(f"job {job_id}: 'reservation' must be a name, got {_shown(reservation)}")
    campaign = entry.get("campaign")
    if campaign is not None and not isinstance(campaign, str):
        raise EntryError(f"job {job_id}: 'campaign' must be a name, got {_shown(campaign)}")
    ctype = entry.get("campaign-type", "")
    if ctype not in ("", "test", "default"):
        raise EntryError(f'job {job_id}: \'campaign-type\' must be "test" or "default", got {_shown(ctype)}')
    checkpoint = entry.get("checkpoint")
    if checkpoint not in (None, "signal"):
        raise EntryError(f"job {job_id}: 'checkpoint' must be \"signal\", got {_shown(checkpoint)}")
    bank = entry.get("bank")
    if bank is not None and (not isinstance(bank, str) or not bank):
        raise EntryError(f"job {job_id}: 'bank' must be a name, got {_shown(bank)}")
    queue = entry.get("queue")
    if queue is not None and (not isinstance(queue, str) or not queue):
        raise EntryError(f"job {job_id}: 'queue' must be a name, got {_shown(queue)}")
    constraints = None
    if entry.get("constraints") is not None:
        try:
            constraints = parse_constraint(entry["constraints"], "constraints")
        except ConstraintError as exc:
            raise EntryError(f"job {job_id}: {exc}") from None
    return EntryFields(
        pa,
        _user(entry, job_id),
        reservation,
        campaign or "",
        ctype,
        checkpoint == "signal",
        bank or "",
        queue,
        constraints,
    )


def _user(entry: Mapping[str, Any], job_id: str) -> int | None:
    """A job's ``user``: an integer is its uid, a string its user's name
    (:func:`~fluxsched_py.ids.user_id`); none, or -1 (the unknown user of
    the SWF traces Batsim workloads are often made from), is None."""
    user = entry.get("user")
    if user is None or (user == -1 and isinstance(user, int) and not isinstance(user, bool)):
        return None
    if isinstance(user, int) and not isinstance(user, bool) and 0 <= user <= MAX_UID:
        return user
    if isinstance(user, str) and user:
        return user_id(user)
    raise EntryError(
        f"job {job_id}: 'user' must be a uid (an integer 0..{MAX_UID}), -1 (unknown) or a user name, got {_shown(user)}"
    )


def _shown(value: Any) -> str:
    """A bad value as an error line shows it: its JSON, cut at 40 characters."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
