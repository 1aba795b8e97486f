"""The embedded broker: kombu's filesystem transport, made safe between processes.

``make run`` on a bare machine queues jobs through files (``settings.base``:
``filesystem_broker_options``). kombu's own filesystem channel has two races between the
processes that share the folder, and both lose a job:

* A sender creates the message file, then locks it and writes it. A consumer polling in
  between takes the still-empty file, fails to decode it and raises out of the worker's
  consumer loop: the worker's main process exits (an "unrecoverable error") and the message,
  already moved out of the queue, is gone. A beat sending a reconciler every half second
  makes this a matter of time on a loaded machine.
* A consumer claims a file with ``shutil.move`` into the system temporary folder, which is a
  copy and a delete when that folder is on another filesystem, so two workers can both take
  the same message.

:class:`Channel` writes each message under a staging folder and renames it into the queue
(a rename within a filesystem is atomic: a consumer sees a whole message or none), claims a
message by renaming it into the broker's own processed folder (exactly one consumer's rename
succeeds), and moves a file that still does not decode to a ``rejected`` folder with an
error in the log instead of stopping the worker.
"""

from __future__ import annotations

import logging
import os
import uuid
from contextlib import suppress
from pathlib import Path
from queue import Empty
from time import monotonic_ns
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads
from kombu.utils.objects import cached_property

logger = logging.getLogger(__name__)


class Channel(filesystem.Channel):
    """kombu's filesystem channel with atomic sends and claims (see the module docstring).

    Transport options beyond kombu's: ``staging_folder`` (where a message is written before
    it enters the queue; default: ``staging`` beside the processed folder) and
    ``rejected_folder`` (where an undecodable file is moved; default: ``rejected``). Both
    must be on the queue folder's filesystem.
    """

    @cached_property
    def staging_folder(self) -> str:
        default = Path(self.processed_folder).parent / "staging"
        return str(self.transport_options.get("staging_folder", default))

    @cached_property
    def rejected_folder(self) -> str:
        default = Path(self.processed_folder).parent / "rejected"
        return str(self.transport_options.get("rejected_folder", default))

    # kombu's filesystem channel renames the abstract channel's ``message`` to ``payload``;
    # kombu passes it by position, and mypy cannot accept both names.
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Write ``payload`` in full under the staging folder, then rename it into ``queue``."""
        # Consumers take messages in the order of their names. kombu's names start with the
        # monotonic clock in milliseconds, unpadded, so messages sent within a millisecond
        # (or across a change in digit count) came out of order; nanoseconds padded to a
        # fixed width keep the order of sending (the clock is system-wide on Linux).
        name = f"{monotonic_ns():020d}_{uuid.uuid4()}.{queue}.msg"
        staged = os.path.join(self.staging_folder, name)
        try:
            os.makedirs(self.staging_folder, exist_ok=True)
            with open(staged, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(staged, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            with suppress(OSError):
                os.unlink(staged)
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        """Claim the oldest message of ``queue`` by renaming it, then read and decode it."""
        suffix = f"{queue}.msg"
        os.makedirs(self.processed_folder, exist_ok=True)
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != suffix:
                continue
            claimed = os.path.join(self.processed_folder, name)
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except FileNotFoundError:
                continue  # another consumer claimed it first
            except OSError as exc:
                raise ChannelError(f"Cannot claim file {name!r} from queue.") from exc
            try:
                with open(claimed, "rb") as f:
                    payload = f.read()
            except OSError as exc:
                raise ChannelError(f"Cannot read file {claimed!r} from queue.") from exc
            try:
                message = loads(bytes_to_str(payload))
            except ValueError:
                self._reject(claimed, name, len(payload))
                continue
            if not self.store_processed:
                with suppress(FileNotFoundError):
                    os.unlink(claimed)
            return message
        raise Empty()

    def _reject(self, claimed: str, name: str, size: int) -> None:
        os.makedirs(self.rejected_folder, exist_ok=True)
        target = os.path.join(self.rejected_folder, name)
        with suppress(OSError):
            os.replace(claimed, target)
        logger.error(
            "broker: %s (%d bytes) in the queue folder is not a message; moved to %s",
            name,
            size,
            target,
        )


class Transport(filesystem.Transport):
    """kombu's filesystem transport with :class:`Channel`, selected by the broker URL
    ``hetplanner-fs://`` (:func:`register`)."""

    Channel = Channel


#: The broker URL scheme of :class:`Transport`.
SCHEME = "hetplanner-fs"


def register() -> None:
    """Make ``hetplanner-fs://`` a kombu transport URL, in every process that loads the
    Celery app (``hetplanner/celery.py``).

    The URL, not Celery's ``broker_transport`` setting, selects the transport: that setting
    overrides any URL's scheme, so a ``redis://`` URL set later would still be served
    from files. (kombu refuses import paths in a URL, hence an alias.)
    """
    TRANSPORT_ALIASES.setdefault(SCHEME, f"{__name__}:Transport")
