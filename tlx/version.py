"""tlx's version and a hash of its own source: part of every compiled kernel's cache key, so an
upgrade of tlx never serves a binary built by an older lowering."""
import hashlib
import pathlib

__version__ = "0.1.0"


def _source_hash() -> str:
    h = hashlib.sha1(__version__.encode())
    for path in sorted(pathlib.Path(__file__).parent.rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


SOURCE_HASH = _source_hash()
