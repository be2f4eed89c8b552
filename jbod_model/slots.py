"""Hot-path helpers: building frozen slots dataclasses without their keyword ``__init__``, and pausing the cyclic
garbage collector around allocation-heavy blocks.

A frozen dataclass's generated ``__init__`` stores each field with ``object.__setattr__`` after matching keyword
arguments by name; for the small objects built once per record (``LogEntry``, ``PartitionRegistration``) that call
is a large share of decoding and replay. :func:`slot_constructor` returns a function that allocates the instance and
stores each slot through its member descriptor: the same object ``cls(**fields)`` builds, in a fraction of the time.
It does not run ``__post_init__``: a caller whose class validates there must have made the same checks itself (the
callers say which). The property tests check the result equals the dataclass constructor's.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


def slot_constructor(cls: type[T]) -> Callable[..., T]:
    """``make(*values)`` → an instance of ``cls`` holding ``values`` in field order (every field, positionally)."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    namespace: dict[str, Any] = {"cls": cls, "new": object.__new__}
    params = []
    body = ["    instance = new(cls)"]
    for i, f in enumerate(fields):
        descriptor: Any = getattr(cls, f.name, None)
        if type(descriptor).__name__ != "member_descriptor":
            raise TypeError(f"{cls.__name__}.{f.name} is not a slot: slot_constructor needs a slots dataclass")
        namespace[f"set{i}"] = descriptor.__set__
        params.append(f"v{i}")
        body.append(f"    set{i}(instance, v{i})")
    body.append("    return instance")
    source = f"def make({', '.join(params)}):\n" + "\n".join(body)
    exec(compile(source, f"<slot constructor of {cls.__name__}>", "exec"), namespace)
    make: Callable[..., T] = namespace["make"]
    return make


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a block that allocates millions of small acyclic objects while millions
    of long-lived ones exist (replaying a large log, building an image's JSON): every collection would walk the
    long-lived ones again, which measured as more than half of such a block's time. Reference counting still frees
    everything acyclic at once; the collector's previous state is restored on exit, whatever happens."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def gc_paused_iteration(items: Iterable[T]) -> Iterator[T]:
    """The items of ``items``, each produced with the cyclic collector paused (see :func:`gc_paused`) and handed
    over with it as it was: the consumer's code never runs with the collector off, and abandoning the iteration
    leaves nothing to restore."""
    iterator = iter(items)
    while True:
        with gc_paused():
            try:
                item = next(iterator)
            except StopIteration:
                return
        yield item
