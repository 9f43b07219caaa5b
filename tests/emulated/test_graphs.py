"""CUDA graph semantics of the emulated device (issue 18): graph_checks.py in one fresh interpreter,
one test per check. On an NVIDIA machine the same checks run on real CUDA graphs (see tests/fixtures/emulated_run.py),
so CUDA is the oracle for every observable result asserted here."""

from __future__ import annotations

from emulated_run import check_file_tests

CHECK_NAMES = [
    "static_input_updated_in_place_between_replays", "capture_runs_no_in_place_work",
    "outputs_keep_their_address_across_replays", "index_computed_inside_the_capture",
    "softmax_follows_updated_inputs", "compiled_function_replays_with_updated_inputs",
    "two_graphs_share_a_pool", "graph_pool_handle_shared_by_two_graphs",
    "replay_after_reset_raises", "replay_before_capture_raises", "keep_graph_then_instantiate",
    "is_current_stream_capturing", "item_in_capture_raises", "synchronize_in_capture_raises",
    "pageable_host_copy_in_capture_raises", "capture_usable_after_a_failed_capture",
    "pinned_host_copy_is_read_at_replay", "random_numbers_change_every_replay",
    "graph_memory_counts_until_the_graph_goes", "make_graphed_callables_forward_and_backward", "accelerator_graph",
    "other_thread_work_runs_during_thread_local_capture", "other_thread_work_runs_during_relaxed_capture",
    "other_thread_sync_refused_during_global_capture", "side_stream_joined_inside_capture_is_recorded",
    "operator_error_inside_capture_is_the_operator_error", "stream_synchronize_in_capture_raises",
    "stream_query_in_capture_raises", "event_synchronize_in_capture_raises", "event_query_in_capture_raises",
    "unjoined_side_stream_fails_the_capture",
]


results, test_every_check_is_listed, test_check = check_file_tests("graph_checks", CHECK_NAMES)
