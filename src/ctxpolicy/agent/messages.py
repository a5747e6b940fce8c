"""Messages as the server sees them, and their content addresses."""

from __future__ import annotations

import hashlib
import json

# The keys of a chat message that are sent to the server; everything else (mini-swe-agent's
# ``extra``: raw responses, timestamps, return codes) stays in the trajectory only.
API_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


def api_message(message: dict) -> dict:
    return {key: message[key] for key in API_KEYS if key in message}


def canonical_json(message: dict) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def message_id(message: dict) -> str:
    """First 16 hex digits of the sha256 of the canonical JSON of the message's API keys."""
    return hashlib.sha256(canonical_json(api_message(message)).encode("utf-8")).hexdigest()[:16]
