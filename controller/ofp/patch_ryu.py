"""Make the installed Ryu 4.34 import with eventlet >= 0.30.3.

eventlet removed ``eventlet.wsgi.ALREADY_HANDLED``, which ``ryu/app/wsgi.py``
imports at class-definition time, so ``ryu-manager`` fails to start. This
script rewrites that import into a guarded one. It is idempotent and is run by
the Makefile after ``pip install ryu``; it imports nothing from Ryu itself.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ORIGINAL = "    from eventlet.wsgi import ALREADY_HANDLED\n    _ALREADY_HANDLED = ALREADY_HANDLED\n"
PATCHED = (
    "    try:  # patched by loom: eventlet >= 0.30.3 has no ALREADY_HANDLED\n"
    "        from eventlet.wsgi import ALREADY_HANDLED\n"
    "    except ImportError:\n"
    "        ALREADY_HANDLED = []\n"
    "    _ALREADY_HANDLED = ALREADY_HANDLED\n"
)


def wsgi_path() -> Path:
    spec = importlib.util.find_spec("ryu")
    if spec is None or spec.origin is None:
        raise SystemExit("patch_ryu: ryu is not installed in this interpreter")
    return Path(spec.origin).parent / "app" / "wsgi.py"


def main() -> int:
    path = wsgi_path()
    text = path.read_text()
    if PATCHED in text:
        print(f"patch_ryu: {path} already patched")
        return 0
    if ORIGINAL not in text:
        print(f"patch_ryu: {path} does not contain the expected import", file=sys.stderr)
        return 1
    path.write_text(text.replace(ORIGINAL, PATCHED))
    print(f"patch_ryu: patched {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
