"""The text the `--json` options print (no command-line framework needed: the fast
`list --json` in pensieve.launch prints it too)."""

from __future__ import annotations

import json
import math
import sys


def json_text(data: object) -> str:
    """What the `--json` options print: json.dumps(data, indent=2, ensure_ascii=False)."""
    return _flat_rows_json(data) or json.dumps(data, indent=2, ensure_ascii=False)


def print_json(data: object) -> None:
    sys.stdout.write(json_text(data) + "\n")


def _scalar_json(value: object) -> str | None:
    if isinstance(value, str):
        return json.encoder.encode_basestring(value)
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float) and math.isfinite(value):
        return float.__repr__(value)  # what json.dumps writes for a finite float
    return None


def _flat_rows_json(data: object) -> str | None:
    """json.dumps(data, indent=2, ensure_ascii=False) for a list of flat rows (what `list`
    prints), written with the C string encoder: the same text, several times faster over
    10,000 rows. None for anything else (the general encoder writes it)."""
    if not isinstance(data, list) or not data:
        return None
    rows = []
    for row in data:
        if not isinstance(row, dict) or not row:
            return None
        lines = []
        for key, value in row.items():
            text = _scalar_json(value)
            if text is None or not isinstance(key, str):
                return None
            lines.append(f"    {json.encoder.encode_basestring(key)}: {text}")
        rows.append("  {\n" + ",\n".join(lines) + "\n  }")
    return "[\n" + ",\n".join(rows) + "\n]"
