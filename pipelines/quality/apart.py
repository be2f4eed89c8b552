"""A call run in a second Python process while this one goes on: how the check builds some of its frames on another
core (:func:`pipelines.quality.suites.build_frames`).

A plain interpreter (``python -m pipelines.quality.apart IN OUT``), not a ``multiprocessing`` child: a spawned child
re-imports the caller's main module, which a user's script without an ``if __name__ == "__main__":`` guard cannot
survive, and a forked one would not carry delta-rs' threads. The call comes in a pickle file (a module-level
function, by reference, and its arguments); its result, or the :class:`JbodError` it raised, goes back in another.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jbod_model.errors import JbodError
from jbod_model.slots import skip_final_collection


class Apart:
    """``function(*args)`` running in a second process; :meth:`result` waits for it (or raises its error)."""

    def __init__(self, function: Callable[..., Any], *args: Any) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="jbod-apart-")
        folder = Path(self._dir.name)
        self._in, self._out, self._err = folder / "call.pickle", folder / "result.pickle", folder / "stderr.txt"
        self._in.write_bytes(pickle.dumps((function, args), protocol=pickle.HIGHEST_PROTOCOL))
        # Its stderr to a file, not a pipe: a pipe nobody reads while this process does its own part would stall the
        # child once full.
        with self._err.open("wb") as err:
            self._proc = subprocess.Popen([sys.executable, "-m", __name__, str(self._in), str(self._out)],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)

    def result(self) -> Any:
        """What the call returned; the error it raised, raised here."""
        code = self._proc.wait()
        try:
            if not self._out.exists():
                lines = self._err.read_text(encoding="utf-8", errors="replace").strip().splitlines()
                raise JbodError(f"a second process of this command stopped (exit {code})"
                                + (f": {lines[-1]}" if lines else ""))
            ok, value = pickle.loads(self._out.read_bytes())
        finally:
            self.close()
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """Stop the process if it still runs (the caller failed first) and remove the files."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._dir.cleanup()

    def __enter__(self) -> Apart:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(call_path: str, out_path: str) -> None:
    """The second process: run the pickled call, pickle what it returned or the :class:`JbodError` it raised (any
    other error is a bug: its traceback goes to stderr, and the caller names its last line)."""
    function, args = pickle.loads(Path(call_path).read_bytes())
    try:
        out: tuple[bool, Any] = (True, function(*args))
    except JbodError as e:
        out = (False, e)
    Path(out_path).write_bytes(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
    skip_final_collection()  # the caller waits for this process' end, not only for its result


if __name__ == "__main__":
    main(*sys.argv[1:3])
