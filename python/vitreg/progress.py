"""progress=True on the batch jobs: a tqdm bar where python3-tqdm is installed, nothing otherwise."""


class _Bar:
    """progress(done, total) drawn as one tqdm bar, made at the first call (when total is known)."""

    def __init__(self, tqdm):
        self._tqdm = tqdm
        self._bar = None

    def __call__(self, done, total):
        if self._bar is None:
            self._bar = self._tqdm(total=total, unit="image")
        self._bar.update(done - self._bar.n)
        if done >= total:
            self._bar.close()


def bar():
    """A progress callback for a job, or None where tqdm is not installed (the job then runs silently)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return _Bar(tqdm)
