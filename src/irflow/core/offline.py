"""offline: whether this process may use the network for data, models and tokenizers.

``offline: true`` in the config reaches each job as ``IRFLOW_OFFLINE=1`` and
``HF_HUB_OFFLINE=1`` (``go_offline``, at the job's start); ``HF_HUB_OFFLINE=1`` set by the
user counts too. Offline, datasets come from data_dir or the download cache, and models and
tokenizers from a local folder or the Hugging Face cache (``local_files_only``).
"""

from __future__ import annotations

import os

OFFLINE_ENV_VARS = ("HF_HUB_OFFLINE", "IRFLOW_OFFLINE")


def env_offline() -> bool:
    return any(
        os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")
        for var in OFFLINE_ENV_VARS
    )


def go_offline() -> None:
    """Make this process, and what it starts, offline. huggingface_hub and transformers read
    ``HF_HUB_OFFLINE`` when imported, so it is set before a job imports them; the loaders also
    pass ``local_files_only`` (``env_offline``), which holds whenever they were imported."""
    for var in OFFLINE_ENV_VARS:
        os.environ[var] = "1"
