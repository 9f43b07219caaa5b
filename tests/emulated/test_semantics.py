"""CUDA semantics of the emulated device: checks.py in one fresh interpreter, one test per check.

Each check was written against a defect of the cpu installer or a CUDA behaviour the
device must keep; on an NVIDIA machine the same checks run on real CUDA (see tests/fixtures/emulated_run.py)."""

from __future__ import annotations

from emulated_run import check_file_tests

CHECK_NAMES = [
    "device_to_host_copy_copies", "host_to_device_copy_copies", "pinned_staging_buffer_reuse",
    "cuda_seed_leaves_cpu_stream", "cuda_seed_repeats", "dropout_draws_from_the_device", "memory_allocated_is_exact", "freed_memory_stays_reserved", "accelerator_is_cuda",
    "is_cuda_and_device_agree", "device_index_out_of_range_raises", "device_index_overflow_raises", "cross_device_op_raises",
    "sync_debug_mode_raises", "sync_debug_flags_data_dependent_ops", "sync_debug_operators_as_measured_on_cuda", "jit_script_factory", "compile_under_autocast", "compile_low_precision_norm", "autocast_follows_cuda_rules",
    "backward_on_device", "events_time_real_work", "views_alias_device_memory", "out_argument_resized_in_place",
    "attention_forward_backward", "generator_state_is_philox", "generators_are_on_their_device",
    "graphsafe_generator_state",
]


results, test_every_check_is_listed, test_check = check_file_tests("checks", CHECK_NAMES)
