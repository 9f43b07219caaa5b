"""A transformers model written the CUDA way (model.cuda(), inputs .to("cuda"), greedy generate, an
autocast training step) vs the same code for the CPU on plain torch. Prints JSON."""

import json

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from cudashim import installers

CFG = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0)


def run(dev: str):
    torch.manual_seed(0)
    model = LlamaForCausalLM(CFG)
    model = model.cuda() if dev == "cuda" else model.to(dev)
    ids = torch.tensor([[1, 2, 3, 4]]).to(dev)
    out = model.eval().generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False)
    model.train()
    with torch.autocast(dev, dtype=torch.bfloat16):
        loss = model(ids, labels=ids).loss
    loss.backward()
    grad = model.model.embed_tokens.weight.grad
    return out.cpu().tolist(), float(loss), float(grad.double().norm())


shim_was_on = installers.installed() == "cpu"
installers.uninstall()
want = run("cpu")
installers.install("cpu")
got = run("cuda")
print(json.dumps({"shim_was_on": shim_was_on, "cpu": want, "cuda": got}))
