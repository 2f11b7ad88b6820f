"""processes: which process wrote a file, told by its name, and whether that process is gone.

A killed job leaves its half-written temporary file, and a killed Snakemake its lock. Either
may be removed only once the process that made it can be shown to be gone: a job can outlive
a killed Snakemake and still be writing, and a run on another machine of a shared file system
cannot be seen from here. So a name carries its maker's host, process id and start time (a
process id is reused, the pair is not), and a process counts as gone only where this host's
``/proc`` shows it: no such process, a zombie, or another process that took its id since.
Without ``/proc`` (not Linux), or for another host, nothing counts as gone.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# The host as one name field: fields are separated by dots, and a DNS host name holds no "_".
HOST = socket.gethostname().replace(".", "_") or "localhost"
# An owner in a name: ``<host>.<pid>.<started>`` (Owner.fields).
OWNER_FIELDS = r"(?P<host>[^.]+)\.(?P<pid>\d+)\.(?P<started>\d+)"


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` from the third (the state) on; None when gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ")".
    return stat[stat.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks after boot (field 22 of
    ``/proc/<pid>/stat``); None when it is gone or a zombie (dead, not yet reaped)."""
    fields = _stat(pid)
    return None if fields is None or fields[0] in ("Z", "X") else int(fields[19])


def ancestors() -> set[int]:
    """This process and those that started it, up to the first (empty without ``/proc``)."""
    pids, pid = set(), os.getpid()
    while pid > 0 and pid not in pids and (fields := _stat(pid)) is not None:
        pids.add(pid)
        pid = int(fields[1])
    return pids


@dataclass(frozen=True)
class Owner:
    """A process: its host, its id and when it started (0: not known)."""

    host: str
    pid: int
    started: int

    @classmethod
    def this_process(cls) -> Owner:
        return cls(HOST, os.getpid(), start_ticks(os.getpid()) or 0)

    @classmethod
    def from_match(cls, found: re.Match | None) -> Owner | None:
        """The owner that a match of a pattern holding ``OWNER_FIELDS`` names, if any."""
        return found and cls(found["host"], int(found["pid"]), int(found["started"]))

    @property
    def fields(self) -> str:
        """The owner as dot-separated name fields: ``<host>.<pid>.<started>``."""
        return f"{self.host}.{self.pid}.{self.started}"

    def is_gone(self) -> bool:
        """True only when this host's ``/proc`` shows that the process no longer runs."""
        if self.host != HOST or not (PROC / "self" / "stat").exists():
            return False
        started = start_ticks(self.pid)
        return started is None or (self.started != 0 and started != self.started)

    def __str__(self) -> str:
        return f"process {self.pid} on {self.host}"
