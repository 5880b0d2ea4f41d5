#!/usr/bin/env python3
"""Runs a command and reports its peak resident set, killing it where it passes a cap.

usage: peak_rss.py CAP_MB COMMAND [ARG...]
The command's output passes through; the last line on stdout is
  peak_rss_mb=<MB> status=<ok|over-cap|exit-N|signal-N>
over-cap: the command's resident set passed CAP_MB and it was killed there (on a machine others
share, a peer that needs tens of GB counts as out of memory at the cap instead of taking the
machine down). The peak is the kernel's ru_maxrss of the child (and its children)."""
import os
import signal
import subprocess
import sys
import time


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cap = float(sys.argv[1])
    child = subprocess.Popen(sys.argv[2:], start_new_session=True)
    over = False
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if rss_mb(child.pid) > cap:
            over = True
            os.killpg(child.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(child.pid, 0)
            break
        time.sleep(0.05)
    peak = usage.ru_maxrss / 1024
    if over:
        state = "over-cap"
    elif os.WIFSIGNALED(status):
        state = f"signal-{os.WTERMSIG(status)}"
    elif os.WEXITSTATUS(status):
        state = f"exit-{os.WEXITSTATUS(status)}"
    else:
        state = "ok"
    sys.stdout.flush()
    print(f"peak_rss_mb={peak:.0f} status={state}", flush=True)


if __name__ == "__main__":
    main()
