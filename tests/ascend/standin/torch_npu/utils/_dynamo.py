"""Stand-in for torch_npu.utils._dynamo: transfer_to_npu reads use_jit_script."""

use_jit_script = False
