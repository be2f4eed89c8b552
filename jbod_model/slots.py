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


def writable_twin(cls: type) -> type | None:
    """A class with the memory layout of the slots class ``cls`` whose instances take plain attribute stores, or
    None when ``cls`` has none.

    Building an instance of a frozen slots dataclass without its ``__init__`` means storing each slot through its
    member descriptor (``descriptor.__set__(instance, value)``: a method call per field, ≈ 0.1 µs) since its
    ``__setattr__`` refuses stores. An instance of the twin takes each store as an ordinary attribute store (which
    CPython specializes to a direct slot write, ≈ 0.01 µs), and then becomes a ``cls`` by ``__class__`` assignment,
    which CPython allows between classes of the same layout (it checks the layouts each time and raises
    ``TypeError`` otherwise).

    For a class derived directly from ``object`` the twin is a plain class with the same ``__slots__``. For one whose
    bases hold slots or a frozen ``__setattr__`` (the message classes) it is a subclass of ``cls`` that adds no slot
    and takes ``object``'s own ``__setattr__`` *and* ``__delattr__``: CPython keeps one C slot for the pair, and
    with either of them inherited from a frozen dataclass every store is dispatched through Python (≈ 0.2 µs, slower
    than the descriptors: why an earlier session measured such a twin at 6.2 µs against 3.4 µs per
    PartitionChangeRecord decoded). With both, a PartitionChangeRecord is built in 0.51 µs against the
    descriptors' 1.48 µs (docs/performance.md, "Frozen records built by plain stores")."""
    slots = cls.__dict__.get("__slots__")
    if type(cls) is not type or not isinstance(slots, tuple) or "__dict__" in slots or "__weakref__" in slots:
        return None
    names = {"__module__": cls.__module__, "__qualname__": f"{cls.__qualname__}.writable_twin"}
    if cls.__base__ is object:
        twin = type(f"{cls.__name__}Twin", (), {"__slots__": slots, **names})
    else:
        twin = type(f"{cls.__name__}Twin", (cls,), {"__slots__": (), "__setattr__": object.__setattr__,
                                                      "__delattr__": object.__delattr__, **names})
    try:
        probe: Any = object.__new__(twin)
        probe.__class__ = cls
    except TypeError:
        return None
    return twin


def slot_constructor(cls: type[T]) -> Callable[..., T]:
    """``make(*values)`` → an instance of ``cls`` holding ``values`` in field order (every field, positionally):
    stored into a :func:`writable_twin` then turned into a ``cls``, or, for a class without one, stored through
    the slots' member descriptors."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    twin = writable_twin(cls)
    namespace: dict[str, Any] = {"cls": cls, "twin": twin, "new": object.__new__}
    params = []
    body = ["    instance = new(cls)" if twin is None else "    instance = new(twin)"]
    for i, f in enumerate(fields):
        descriptor = _slot(cls, f.name)
        params.append(f"v{i}")
        if twin is None:
            namespace[f"set{i}"] = descriptor.__set__
            body.append(f"    set{i}(instance, v{i})")
        else:
            body.append(f"    instance.{f.name} = v{i}")
    if twin is not None:
        body.append("    instance.__class__ = cls")
    body.append("    return instance")
    source = f"def make({', '.join(params)}):\n" + "\n".join(body)
    exec(compile(source, f"<slot constructor of {cls.__name__}>", "exec"), namespace)
    make: Callable[..., T] = namespace["make"]
    return make


def slot_values(cls: type, names: Iterable[str]) -> Callable[[Any], tuple[Any, ...]]:
    """``values(obj)`` → ``(obj.a, obj.b, …)``, the named fields of an instance of ``cls`` in that order, as one
    generated function: attribute loads, which CPython specializes to slot reads, where ``operator.attrgetter``
    looks each name up in turn (InputRow's 17 packed fields: 0.19 against 0.51 µs a row)."""
    names = tuple(names)
    for name in names:
        _slot(cls, name)
    source = f"def values(obj):\n    return ({''.join(f'obj.{name}, ' for name in names)})"
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<slot values of {cls.__name__}>", "exec"), namespace)
    values: Callable[[Any], tuple[Any, ...]] = namespace["values"]
    return values


def _slot(cls: type, name: str) -> Any:
    """The member descriptor of slot ``name`` of ``cls`` (what generated code may store into or read by name), or
    ``TypeError``."""
    descriptor = getattr(cls, name, None) if name.isidentifier() else None
    if type(descriptor).__name__ != "member_descriptor":
        raise TypeError(f"{cls.__name__}.{name} is not a slot: a slots dataclass's field is needed")
    return descriptor


#: Tracked objects left from a pause (``gc.get_count()[0]``: containers allocated less those freed) past which its
#: end moves them straight to the collector's oldest generation (see :func:`gc_paused`).
PROMOTE_AFTER = 100_000


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a block that allocates millions of small acyclic objects while millions
    of long-lived ones exist (replaying a large log, building an image's JSON): every collection would walk the
    long-lived ones again, which measured as more than half of such a block's time. Reference counting still frees
    everything acyclic at once; the collector's previous state is restored on exit, whatever happens.

    A block that leaves more than :data:`PROMOTE_AFTER` new objects alive (a replayed image: 800 k at 200 k
    partitions) puts them in the oldest generation, as two collections would (the young one just after the pause,
    then the middle one), without walking them: ``gc.freeze()`` then ``gc.unfreeze()`` splices the generations'
    lists and resets the young count. That walk took 0.49–0.54 s of a 14 s ``jbod image --full-log --json`` at 200 k
    partitions (docs/performance.md). A reference cycle made during the block then waits for the next full
    collection instead of the next young one. Not done when the process has frozen objects of its own
    (``unfreeze`` would release them).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_count()[0] > PROMOTE_AFTER and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def skip_final_collection() -> None:
    """Let the process end without the cyclic collector's last passes: at exit Python collects once more over every
    object still tracked (the modules, what a command holds), only for the memory to go back to the system with the
    process — 0.5 s at the end of ``jbod check`` at 200 k partitions (docs/performance.md).
    ``gc.freeze()`` puts them all beyond its reach. For a process' entry point, as its last step: a reference cycle
    left then is never finalized (no one here needs that of one)."""
    gc.freeze()


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
