"""Stand-in for torch_npu._C._distributed_c10d."""


class ProcessGroupHCCL:
    """Only its identity matters: transfer_to_npu binds it as torch.distributed.ProcessGroupNCCL."""
