"""What a job left in a folder, as bytes: the tests compare runs file by file."""
import os


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def tree(out, skip=("job.json", "job.lock")):
    """Every file under `out` (relative path -> bytes), but those named in `skip`."""
    files = {}
    for base, _, names in os.walk(out):
        for n in names:
            rel = os.path.relpath(os.path.join(base, n), out)
            if rel not in skip:
                files[rel] = read_bytes(os.path.join(base, n))
    return files
