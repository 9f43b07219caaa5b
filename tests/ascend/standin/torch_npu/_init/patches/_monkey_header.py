# Header of the stand-in torch_npu/_init/patches/monkey_patches.py; tests/ascend/_wheel.py appends the
# real _apply_patches function, extracted verbatim from the wheel, below this header.
import sys
import types

import torch


class ErrCode:
    NOT_SUPPORT = "NOT_SUPPORT"


def pta_error(code):
    return f" [ERRCODE {code}]"

