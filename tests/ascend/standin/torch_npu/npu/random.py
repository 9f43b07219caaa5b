"""Stand-in for torch_npu.npu.random."""

from .. import recorder

get_rng_state = recorder("npu.random.get_rng_state")
set_rng_state = recorder("npu.random.set_rng_state")

__all__ = ["get_rng_state", "set_rng_state"]
