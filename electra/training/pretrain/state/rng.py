"""The global random generators (Python, numpy, torch, CUDA) as a checkpointable state.

A training step draws dropout from torch's global generators; the masking has its own seeded generators
(see trainer.masking_seed), so these are all a resumed run needs to continue the same random stream.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from electra.errors import InputError


def capture_rng_state() -> dict[str, Any]:
    """The global generators a training step draws from, as tensors and plain values.

    Python's and numpy's states are tuples holding big ints and a uint32 array: converted to int64 tensors
    so rng.pt loads with weights_only=True like every other pickle of a checkpoint. DataLoader worker and
    other private generators are the trainer's business (their seeds belong in trainer_state).
    """
    py_version, py_internal, py_gauss = random.getstate()
    np_name, np_key, np_pos, np_has_gauss, np_cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": {
            "version": py_version,
            "state": torch.tensor(py_internal, dtype=torch.int64),
            "gauss_next": py_gauss,
        },
        "numpy": {
            "bit_generator": np_name,
            "key": torch.from_numpy(np.asarray(np_key, dtype=np.int64)),
            "pos": int(np_pos),
            "has_gauss": int(np_has_gauss),
            "cached_gaussian": float(np_cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Undo capture_rng_state. All-or-nothing: a malformed state changes no generator.

    CUDA states are restored per device for as many devices as both the state and this machine have: a
    resume on fewer or more GPUs still works, only its random stream differs on the unmatched devices.
    """
    try:
        py = state["python"]
        py_state = (int(py["version"]), tuple(int(x) for x in py["state"].tolist()), py["gauss_next"])
        npy = state["numpy"]
        np_state = (
            str(npy["bit_generator"]),
            npy["key"].numpy().astype(np.uint32),
            int(npy["pos"]),
            int(npy["has_gauss"]),
            float(npy["cached_gaussian"]),
        )
        torch_state = state["torch"]
        if not isinstance(torch_state, torch.Tensor) or torch_state.dtype != torch.uint8:
            raise TypeError("'torch' is not a uint8 tensor")
        cuda_states = list(state.get("cuda") or [])
        # Dry runs on private generators: they reject a bad length or version before a global one changes.
        random.Random().setstate(py_state)
        np.random.RandomState().set_state(np_state)
        torch.Generator().set_state(torch_state.cpu())
    except (LookupError, TypeError, ValueError, AttributeError, RuntimeError) as e:
        raise InputError(
            f"RNG state is malformed ({type(e).__name__}: {e}); it was not produced by capture_rng_state"
        ) from e
    random.setstate(py_state)
    np.random.set_state(np_state)
    torch.set_rng_state(torch_state.cpu())
    if cuda_states and torch.cuda.is_available():
        for device, cuda_state in enumerate(cuda_states[: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state.cpu(), device)


class GlobalRng:
    """The global generators behind the state_dict / load_state_dict protocol of the other training parts."""

    def state_dict(self) -> dict[str, Any]:
        return capture_rng_state()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        restore_rng_state(state)
