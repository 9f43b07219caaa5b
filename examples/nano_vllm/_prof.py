import sys, torch
torch.set_num_threads(1)
from nanovllm import LLM
from nanovllm.utils.context import set_context
llm = LLM(sys.argv[1], enforce_eager=False, max_model_len=512, max_num_batched_tokens=1024, max_num_seqs=16, gpu_memory_utilization=0.05)
mr = llm.model_runner
bs = 1
ids = torch.randint(0, 1000, (bs,), device="cuda"); pos = torch.full((bs,), 63, device="cuda")
table = torch.arange(bs, dtype=torch.int32, device="cuda").reshape(bs, 1); slots = table[:, 0] * 256 + 63
lens = torch.full((bs,), 64, dtype=torch.int32, device="cuda")
from torch.profiler import profile, ProfilerActivity
with torch.inference_mode():
    set_context(False, slot_mapping=slots, context_lens=lens, block_tables=table)
    for name, fn in (("eager", lambda: mr.model.compute_logits(mr.model(ids, pos))), ("replay", lambda: mr.run_model(ids, pos, False))):
        fn()
        with profile(activities=[ProfilerActivity.CPU]) as p:
            for _ in range(5): fn()
        print(name); print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))
