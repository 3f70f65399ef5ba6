"""A small Llama against Hugging Face's LlamaForCausalLM (built from its config, nothing
downloaded), our initial weights loaded into it: float64 loss and every parameter's gradient to
1e-10 relative. Its rotary tables are replaced by ours (checked apart against its own), its
RMSNorm kept in float64 and its attention sdpa: it computes the tables, the norm and eager
attention's softmax in float32 whatever the model's dtype (unpatched, the loss differs by 1.5e-10
relative; it is held to 1e-8). Marked ``torch``: skipped where PyTorch or transformers is not
importable (CI); never an engine dependency."""
import numpy as np
import pytest

import zoo
from engine import reference
from engine.data import TeacherData
from engine.initializers import initial_state
from engine.ir import Kind
from ops import registry as op_registry
from zoo.llama import mlp_width

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.torch

CONFIG = dict(layers=2, width=32, heads=4, seq=12, vocab=40, batch=3)


def hf_name(ours: str) -> str:
    """Our parameter's name as LlamaForCausalLM's state dict spells it."""
    top = {"embed_tokens": "model.embed_tokens.weight", "norm/gamma": "model.norm.weight",
           "lm_head/w": "lm_head.weight"}
    if ours in top:
        return top[ours]
    block, part, rest = ours.split("/", 2)
    i = int(block.removeprefix("block"))
    if rest == "norm/gamma":
        return f"model.layers.{i}.{'input_layernorm' if part == 'attn' else 'post_attention_layernorm'}.weight"
    module = "self_attn" if part == "attn" else "mlp"
    return f"model.layers.{i}.{module}.{rest.removesuffix('/w')}.weight"


def hf_llama(state, g):
    c = CONFIG
    config = transformers.LlamaConfig(vocab_size=c["vocab"], hidden_size=c["width"], intermediate_size=mlp_width(c["width"]),
                                      num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                                      num_key_value_heads=c["heads"], max_position_embeddings=c["seq"],
                                      rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False,
                                      mlp_bias=False, use_cache=False)
    config._attn_implementation = "sdpa"     # eager takes its softmax in float32
    model = transformers.LlamaForCausalLM(config).to(torch.float64)
    weights = {hf_name(g.tensors[t].name): torch.tensor(state[t]) for t in g.leaves(Kind.PARAMETER)}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert not unexpected and not [m for m in missing if "rotary" not in m]
    return model


def gradients_of(g):
    """Per parameter, the gradient its optimizer step reads."""
    out = {}
    for n in g.nodes:
        k = op_registry.get(n.op).gradient_input
        if k is not None:
            out[n.inputs[0]] = n.inputs[k]
    return out


def float64_rms_norm(self, x):
    """LlamaRMSNorm.forward without its cast to float32."""
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def hf_loss(model, tokens, labels):
    logits = model(input_ids=tokens, use_cache=False).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, CONFIG["vocab"]), labels.reshape(-1))


def test_float64_loss_and_gradients_equal_llama_for_causal_lm(monkeypatch):
    g = zoo.build("llama-2-32-4", dtype="float64", **{k: v for k, v in CONFIG.items() if k not in
                                                       ("layers", "width", "heads")})
    state = initial_state(g, seed=0)
    batch = TeacherData(g, seed=0).batch(0)
    grads = gradients_of(g)
    out = reference.run(g, {**state, **batch}, keep=[g.loss, *grads.values()])

    model = hf_llama(state, g)
    cos, sin = (torch.tensor(state[g.tensor_id(n)]) for n in ("rope_cos", "rope_sin"))
    theirs_cos, theirs_sin = model.model.rotary_emb(torch.zeros(1, dtype=torch.float64),
                                                     torch.arange(CONFIG["seq"])[None])
    assert torch.allclose(theirs_cos[0], cos, rtol=0, atol=1e-6)      # theirs: float32
    assert torch.allclose(theirs_sin[0], sin, rtol=0, atol=1e-6)
    tokens = torch.tensor(batch[g.tensor_id("tokens")]).long()
    labels = torch.tensor(batch[g.tensor_id("next_tokens")]).long()
    with torch.no_grad():
        assert float(out[g.loss]) == pytest.approx(float(hf_loss(model, tokens, labels)), rel=1e-8)
    model.model.rotary_emb.forward = lambda x, position_ids: (cos[None], sin[None])
    monkeypatch.setattr(transformers.models.llama.modeling_llama.LlamaRMSNorm, "forward", float64_rms_norm)
    loss = hf_loss(model, tokens, labels)
    loss.backward()

    assert float(out[g.loss]) == pytest.approx(float(loss.detach()), rel=1e-12)
    named = dict(model.named_parameters())
    for p, gp in grads.items():
        want = named[hf_name(g.tensors[p].name)].grad.numpy()
        scale = max(float(np.max(np.abs(want))), 1e-30)
        assert np.max(np.abs(out[gp] - want)) <= 1e-10 * scale, g.tensors[p].name
