"""torch_npu.npu.random of the simulated torch_npu: seeding over the core's per-device generators."""
import torch

from . import _dm

__all__ = ["get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "initial_seed"]


def _gen(device=None):
    return _dm.core.default_generator(_dm.index(device))


def get_rng_state(device="npu"):
    return _gen(device).get_state()


def get_rng_state_all():
    return [get_rng_state(i) for i in range(_dm.device_count())]


def set_rng_state(new_state, device="npu"):
    _gen(device).set_state(new_state.clone())


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed):
    _gen().manual_seed(int(seed))


def manual_seed_all(seed):
    for i in range(_dm.device_count()):
        _gen(i).manual_seed(int(seed))


def seed():
    _gen().seed()


def seed_all():
    s = torch.initial_seed() if _dm.device_count() == 0 else _gen(0).seed()
    for i in range(1, _dm.device_count()):
        _gen(i).manual_seed(s)


def initial_seed():
    return _gen().initial_seed()
