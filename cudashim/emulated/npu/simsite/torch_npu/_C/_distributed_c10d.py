"""torch_npu._C._distributed_c10d: ProcessGroupHCCL names the simulated HCCL group (Gloo underneath)."""
from cudashim.emulated.npu.hccl import ProcessGroupHCCL

__all__ = ["ProcessGroupHCCL"]
