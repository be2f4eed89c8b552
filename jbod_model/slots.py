"""Building frozen slots dataclasses on hot paths without their keyword ``__init__``.

A frozen dataclass's generated ``__init__`` stores each field with ``object.__setattr__`` after matching keyword
arguments by name; for the small objects built once per record (``LogEntry``, ``PartitionRegistration``) that call
is a large share of decoding and replay. :func:`slot_constructor` returns a function that allocates the instance and
stores each slot through its member descriptor: the same object ``cls(**fields)`` builds, in a fraction of the time.
It does not run ``__post_init__``: a caller whose class validates there must have made the same checks itself (the
callers say which). The property tests check the result equals the dataclass constructor's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
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
