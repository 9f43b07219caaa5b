"""Defects of the emulated device that third-party subjects found (verification/third_party.py):
subject_checks.py in one fresh interpreter, one test per check (on real CUDA where there is one)."""

from __future__ import annotations

from emulated_run import check_file_tests

CHECK_NAMES = ["lstm_on_device", "gru_on_device", "checkpoint_of_cuda_tensors_loads_on_cuda", "deepcopy_of_cuda_module",
               "svd_and_eig_layouts_are_cuda_layouts", "attention_keeps_its_mask", "compiled_attention",
               "compiled_attention_trains", "ddp_trains_past_its_first_step"]


results, test_every_check_is_listed, test_check = check_file_tests("subject_checks", CHECK_NAMES)
