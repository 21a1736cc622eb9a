"""PDF extraction in a child process with resource limits.

PDFium is C++: a hostile PDF that makes it crash (a segfault, an abort) or loop would end
or hang the whole CLI, a batch worker or the studio, with no word about which file did it.
So a PDF is read by a child Python process (`python -m pensieve.library.extract`) that
first limits its own address space (RLIMIT_AS, `library.extract_memory_mb`) and CPU time
(RLIMIT_CPU), and is killed at `library.extract_timeout_s`. Whatever happens to it becomes
the one-line `ExtractionError` that refuses the file: nothing is stored.

The PDF goes to the child on stdin; the result comes back as one JSON object on stdout:
{"ok": {...the Extracted fields...}} or {"error": "the one-line reason"}.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

from pensieve.library.extracted import Extracted, ExtractionError, Limits

# The child's own startup (Python, pypdfium2: a VmPeak of 27 MB) fits in this address space; the limit
# given is on top of it, so `extract_memory_mb` is what the PDF itself may take.
_BASE_ADDRESS_SPACE_MB = 160

# Past the wall-clock timeout the child is killed; RLIMIT_CPU is the backstop should the
# parent itself be stopped.
_CPU_GRACE_S = 5


def extract_pdf(data: bytes, limits: Limits, command: list[str] | None = None) -> Extracted:
    """Extract a PDF in a child process; raises ExtractionError with the one-line reason.
    `command` runs another child program in its place (the tests' crashing one)."""
    argv = command or [
        sys.executable,
        "-P",  # `-m` would put the working directory first on sys.path: a planted json.py there runs
        "-m",
        "pensieve.library.extract",
        json.dumps(
            {
                "max_pages": limits.max_pages,
                "max_text_chars": limits.max_text_chars,
                "max_unpacked_bytes": limits.max_unpacked_bytes,
                "memory_mb": limits.memory_mb,
                "address_space_mb": _BASE_ADDRESS_SPACE_MB + limits.memory_mb,
                "cpu_s": int(limits.timeout_s) + _CPU_GRACE_S,
            }
        ),
    ]
    try:
        done = subprocess.run(  # noqa: S603  # our own interpreter and module, no shell
            argv,
            input=data,
            capture_output=True,
            timeout=limits.timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ExtractionError(
            f"took longer than library.extract_timeout_s ({limits.timeout_s:g} s) to read "
            "(a damaged or hostile PDF?); not added, or raise the limit for a very large one"
        ) from None
    except OSError as exc:
        raise ExtractionError(f"could not be read: the PDF reader did not start ({exc.strerror})") from None
    return _result(done, limits)


def _result(done: subprocess.CompletedProcess[bytes], limits: Limits) -> Extracted:
    if done.returncode < 0:
        name = _signal_name(-done.returncode)
        if -done.returncode == signal.SIGXCPU:
            raise ExtractionError("used too much CPU time to be read (a hostile PDF?); not added")
        if -done.returncode == signal.SIGABRT:  # PDFium aborts when it runs out of memory
            raise ExtractionError(
                f"crashed the PDF reader ({name}: a damaged or hostile PDF, or one needing more than "
                f"library.extract_memory_mb ({limits.memory_mb:,} MB)); not added"
            )
        raise ExtractionError(f"crashed the PDF reader ({name}: a damaged or hostile PDF); not added")
    try:
        answer = json.loads(done.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        raise ExtractionError(answer["error"])
    if isinstance(answer, dict) and isinstance(answer.get("ok"), dict):
        return _extracted(answer["ok"])
    if b"MemoryError" in done.stderr:
        raise ExtractionError(
            f"needs more than library.extract_memory_mb ({limits.memory_mb:,} MB) to be read; not added, "
            "or raise the limit"
        )
    raise ExtractionError(
        f"stopped the PDF reader (exit status {done.returncode}: a damaged or hostile PDF?); not added"
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _extracted(data: dict[str, Any]) -> Extracted:
    try:
        return Extracted(
            kind="pdf",
            text=str(data["text"]),
            marks=tuple((int(offset), str(label)) for offset, label in data["marks"]),
            mark_kind="page",
            title=str(data.get("title") or ""),
            authors=tuple(str(a) for a in data.get("authors") or ()),
            published=str(data.get("published") or ""),
            doi=str(data.get("doi") or ""),
            isbn=str(data.get("isbn") or ""),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ExtractionError(f"could not be read: the PDF reader's answer was malformed ({exc})") from None
