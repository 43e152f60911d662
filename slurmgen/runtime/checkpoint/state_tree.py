"""The user's state as a tree: is it sharded, how to snapshot it for a background write, how to fill it in place.

torch is imported inside the functions; a state that holds no tensor is never sharded and needs no torch.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any


def _leaves(state: Any) -> Iterator[Any]:
    stack = [state]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            yield item


def stateful(value: Any) -> bool:
    """isinstance(value, torch.distributed.checkpoint.stateful.Stateful), without importing it: Stateful is a
    runtime-checkable Protocol of two methods, state_dict and load_state_dict, so the check is whether both are
    there. Importing that module imports all of torch.distributed.checkpoint (sympy and the default planner
    with it: 2.9 s of CPU per rank, measured with `python -X importtime`), which a plain save never uses; paid at
    a run's first save, inside the preemption's grace time."""
    return callable(getattr(value, "state_dict", None)) and callable(getattr(value, "load_state_dict", None))


def _sharded_types() -> tuple[type, ...]:
    """DTensor and ShardedTensor, those of them whose module is loaded: no instance of a class exists before its
    module is imported, and importing them here would cost every plain save their import."""
    found = []
    for module, name in (("torch.distributed.tensor", "DTensor"),
                         ("torch.distributed._shard.sharded_tensor.api", "ShardedTensor")):  # fmt: skip
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            found.append(cls)
    return tuple(found)


def is_sharded(state: Any) -> bool:
    """Does the state need every rank to write its part: a DTensor or ShardedTensor anywhere, or a Stateful
    object (a model, an optimizer, an app state with state_dict/load_state_dict) at the top level?"""
    if "torch" not in sys.modules:  # no tensors of any kind exist yet
        return False
    if any(stateful(value) for value in top_level(state).values()):
        return True
    kinds = _sharded_types()
    return bool(kinds) and any(isinstance(leaf, kinds) for leaf in _leaves(state))


def top_level(state: Any) -> dict[str, Any]:
    """DCP takes a dict; `get_state_dict`'s output is a (model, optimizer) tuple: key it by position."""
    if isinstance(state, Mapping):
        return dict(state)
    if isinstance(state, (list, tuple)):
        return {str(index): value for index, value in enumerate(state)}
    raise TypeError(f"a sharded state must be a dict, list or tuple, not {type(state).__name__}")


def resolve_stateful(state: Any) -> dict[str, Any]:
    """A shallow copy with each top-level Stateful replaced by its state_dict(), as dcp.save does itself
    (torch/distributed/checkpoint/state_dict_saver.py `_stateful_to_state_dict`): done here, on the caller's
    thread, so that a background write sees the state of the moment of the call."""
    return {k: v.state_dict() if stateful(v) else v for k, v in top_level(state).items()}


def make_stager() -> Any:
    """torch's DefaultStager without pinned or shared memory: a synchronous deep copy with tensor offload to CPU
    (torch/distributed/checkpoint/staging.py). Kept for the whole run: its StateDictStager caches each staged
    storage, keyed weakly by the source storage, and copies into it again on the next stage (_state_dict_stager.py
    `_stage_untyped_storage`), so every background save after the first reuses its buffers (no allocation, no
    page faults) at the cost of keeping one CPU copy of this rank's state between saves."""
    from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

    return DefaultStager(
        StagingOptions(
            use_pinned_memory=False, use_shared_memory=False, use_async_staging=False, use_non_blocking_copy=False
        )
    )


def stage(state: Any, stager: Any) -> Any:
    """A private CPU copy of the state (DTensors stay DTensors, with their own local shards), so training can
    change its tensors while the copy is written. The copy's buffers are the stager's: stage again only once
    the previous copy has been written."""
    return stager.stage(state)


def snapshot(state: Any, stager: Callable[[], Any]) -> Any:
    """A copy of a plain state for a background write: staged when torch is loaded, else a deep copy."""
    if "torch" in sys.modules:
        return stage(state, stager())
    return copy.deepcopy(state)


def fill_in_place(into: Any, loaded: Any) -> None:
    """Copy a plain state (as torch.load returned it) into the user's structure: tensors are copied into,
    Stateful objects get load_state_dict, dicts are filled key by key, anything else is replaced."""
    import torch

    if not isinstance(into, (dict, list)):
        raise TypeError(f"pre.load(into=...) needs a dict or a list to fill, not {type(into).__name__}")
    keys = list(loaded) if isinstance(loaded, Mapping) else list(range(len(loaded)))
    for key in keys:
        value = loaded[key]
        target = into.get(key) if isinstance(into, dict) else (into[key] if key < len(into) else None)
        if target is not None and stateful(target) and not isinstance(target, torch.Tensor):
            target.load_state_dict(value)
        elif isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor) and target.shape == value.shape:
            with torch.no_grad():
                target.copy_(value)
        elif isinstance(target, (dict, list)) and isinstance(value, (Mapping, list, tuple)):
            fill_in_place(target, value)
        elif isinstance(into, dict) or key < len(into):
            into[key] = value
        else:
            into.append(value)


class ModelOptimizerState:
    """A Stateful for one model and its optimizer(s), sharded or not: `pre.save({"train": ModelOptimizerState(m,
    opt)})` writes it through get_state_dict, and `pre.load(into=...)` puts it back with set_state_dict (the
    pattern of torch's DCP recipe, torch/distributed/checkpoint/state_dict.py)."""

    def __init__(self, model: Any, optimizer: Any = None) -> None:
        self.model = model
        self.optimizer = optimizer

    def state_dict(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

        if self.optimizer is None:
            return {"model": get_model_state_dict(self.model)}
        model, optim = get_state_dict(self.model, self.optimizer)
        return {"model": model, "optim": optim}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_state_dict

        if self.optimizer is None:
            set_model_state_dict(self.model, state["model"])
        else:
            set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
