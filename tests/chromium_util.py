"""Headless Chromium (Debian's `chromium`) for the report tests: pages are opened from files,
with no server, no network and a throwaway profile."""
import shutil
import subprocess
import tempfile

CHROMIUM = shutil.which("chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


def chromium(tmp, *args):
    profile = tempfile.mkdtemp(dir=tmp)
    return subprocess.run([CHROMIUM, *FLAGS, "--user-data-dir=" + profile, *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def console_errors(stderr):
    """Lines where the page itself logged to the console or threw (Chromium's own dbus noise excluded)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
