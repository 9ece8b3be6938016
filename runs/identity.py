"""Who holds a chunk: one identity per worker PROCESS.

``nodename/boot/process``: ``boot`` is drawn once per worker start (prefork
children inherit it, so a worker started again under the same node name knows
the chunks of the earlier one are orphans); ``process`` is drawn again in every
child after a fork, so two prefork children of one worker never hold a chunk
under the same name, and a displaced child cannot commit.
"""

from __future__ import annotations

import os
import socket
import uuid

BOOT_ID = uuid.uuid4().hex[:12]
_process = {"pid": os.getpid(), "id": uuid.uuid4().hex[:8]}


def _new_process_id() -> None:
    _process["pid"] = os.getpid()
    _process["id"] = uuid.uuid4().hex[:8]


os.register_at_fork(after_in_child=_new_process_id)


def process_id() -> str:
    if _process["pid"] != os.getpid():  # forked by means that skip the hook
        _new_process_id()
    return f"{_process['pid']}-{_process['id']}"


def holder(nodename: str | None = None) -> str:
    """The holder name of this process for a worker of ``nodename``."""
    return f"{nodename or 'worker'}/{BOOT_ID}/{process_id()}"


def inline_holder() -> str:
    return holder(f"inline:{socket.gethostname()}")
