"""What the Flower processes print: followed line by line into a log file in the run directory (progress
lines echoed as they come), and, when a run fails, the one line that says why.

A failed round ends the ServerApp with a FederationError whose message is that line (federated.strategy:
"round 1 (train): 1 of 3 devices failed: node 17: FileNotFoundError: ..."); Flower prints it at the end
of a traceback, among pages of its own log. ``failure_line`` finds it, so the error a caller sees is that
line and the log file's path, not the pages.
"""
from __future__ import annotations

import re
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# the last line of a Python traceback: "module.path.SomeError: message"
RAISED = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Timeout)): (.+)$")
# Flower's reason for a ClientApp that raised: "<class 'FileNotFoundError'>:<'message'>"
CLIENT_REASON = re.compile(r"^<class '(?:\w+\.)*([^']+)'>:<'(.*)'>$", re.DOTALL)
OWN_ERRORS = ("FederationError", "FederationTimeout")
WRAPPERS = ("ClientAppException", "RayTaskError")   # what Flower's simulation wraps a device's exception in


def follow(stream, lines: list, log_path, echo=None) -> None:
    """Every line of ``stream`` (a child's stdout), appended to ``lines`` and written to ``log_path`` as it
    comes (None: kept in memory only), and printed when ``echo(line)`` holds."""
    log = open(log_path, "w") if log_path is not None else None
    try:
        for line in stream:
            lines.append(line)
            if log is not None:
                log.write(line)
                log.flush()
            if echo is not None and echo(line):
                print(line.rstrip(), flush=True)
    finally:
        if log is not None:
            log.close()


def client_reason(reason: str) -> str:
    """Flower's reason for a device that raised, as "Type: message" on one line. In a simulation the
    reason is Ray's traceback of Flower's ClientAppException: the device's own exception is read out of it."""
    reason = str(reason).strip()
    match = CLIENT_REASON.match(reason)
    if not match:
        return one_line(reason)
    kind, text = match.groups()
    raised = [RAISED.match(line.strip()) for line in ANSI.sub("", text).splitlines()[1:]]
    own = [found.groups() for found in raised if found and found.group(1) not in WRAPPERS]
    if own:
        kind, text = own[0]   # the first one Ray prints is the cause
    return one_line(f"{kind}: {text}")


def one_line(text: str) -> str:
    return " ".join(ANSI.sub("", str(text)).split())


def failure_line(output: str) -> str | None:
    """Why a Flower run failed, in one line: the message of the last FederationError (or
    FederationTimeout) its output shows, else "Type: message" of the last exception it shows; None
    when it shows none."""
    raised = []
    for line in ANSI.sub("", output).splitlines():
        match = RAISED.match(line.strip())
        if match:
            raised.append(match.groups())
    own = [message for kind, message in raised if kind in OWN_ERRORS]
    if own:
        return one_line(own[-1])
    return one_line(f"{raised[-1][0]}: {raised[-1][1]}") if raised else None


def failure_message(what: str, output: str, log_path) -> str:
    """One line for a failed run: why (``failure_line``, else the output's last line), what failed, and
    the log file that holds the rest."""
    why = failure_line(output)
    if why is None:
        last = [line for line in ANSI.sub("", output).splitlines() if line.strip()]
        why = one_line(last[-1]) if last else "it printed nothing"
        return f"{what}: {why}{log_note(log_path)}"
    return f"{why} ({what}{log_note(log_path)})"


def log_note(log_path) -> str:
    return f"; log: {Path(log_path)}" if log_path is not None else ""
