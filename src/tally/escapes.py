"""Text from others shown to people: control characters made visible, not obeyed.

One rule for the log (tally.serve.logs: no forged lines) and the terminal (tally.cli:
no escape sequences run from a provider's name): control characters (C0, DEL, C1) and
Unicode line separators become `\\xNN` or `\\uNNNN`.
"""

from __future__ import annotations

_ESCAPES = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)
}


def visible(text: str) -> str:
    """`text` with every control character escaped."""
    return text.translate(_ESCAPES)
