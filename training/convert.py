"""Map a trained PyTorch Transformer into CTranslate2 and check the conversion."""

from __future__ import annotations

from pathlib import Path

import ctranslate2
import numpy as np
import torch

from training.nmt import Transformer, greedy, token_log_probs


def _np(t: torch.Tensor) -> np.ndarray:
    """Detach a tensor into a float32 numpy array."""
    return t.detach().cpu().float().numpy().copy()


def _norm(spec, ln: torch.nn.LayerNorm) -> None:
    """Copy a layer norm."""
    spec.gamma = _np(ln.weight)
    spec.beta = _np(ln.bias)


def _linear(spec, lin: torch.nn.Linear) -> None:
    """Copy a linear layer."""
    spec.weight = _np(lin.weight)
    spec.bias = _np(lin.bias)


def _ffn(spec, ffn) -> None:
    """Copy a feed-forward block."""
    _norm(spec.layer_norm, ffn.norm)
    _linear(spec.linear_0, ffn.lin0)
    _linear(spec.linear_1, ffn.lin1)


def alignment(dec_layers: int, heads: int) -> tuple[int, int]:
    """The decoder layer and head count whose attention `return_attention` reports.

    The middle layer with all its heads averaged: for the demo models (3 layers, 4 heads)
    layer 1 with 4 heads, the best of every choice on tagged training-side sentences
    (`python -m training.tagged choose`; the figures are in docs/formats.md). Out of
    range values crash CTranslate2, so they follow the model's shape.
    """
    return dec_layers // 2, heads


def to_spec(model: Transformer, vocab: list[str]) -> ctranslate2.specs.TransformerSpec:
    """Return a TransformerSpec holding model's weights; vocab is in SentencePiece id order."""
    c = model.config
    layer, heads = alignment(c.dec_layers, c.heads)
    spec = ctranslate2.specs.TransformerSpec.from_config(
        (c.enc_layers, c.dec_layers), c.heads, alignment_layer=layer, alignment_heads=heads
    )
    spec.config.layer_norm_epsilon = c.eps
    table = _np(model.pos)
    emb = _np(model.embed.weight)
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = emb
    dec.embeddings.weight = emb
    enc.position_encodings.encodings = table
    dec.position_encodings.encodings = table
    _norm(enc.layer_norm, model.enc_norm)
    _norm(dec.layer_norm, model.dec_norm)
    dec.projection.weight = emb
    dec.projection.bias = _np(model.out_bias)
    for layer_spec, layer in zip(enc.layer, model.encoder, strict=False):
        _norm(layer_spec.self_attention.layer_norm, layer.norm)
        _linear(layer_spec.self_attention.linear[0], layer.attn.qkv)
        _linear(layer_spec.self_attention.linear[1], layer.attn.out)
        _ffn(layer_spec.ffn, layer.ffn)
    for layer_spec, layer in zip(dec.layer, model.decoder, strict=False):
        _norm(layer_spec.self_attention.layer_norm, layer.norm_self)
        _linear(layer_spec.self_attention.linear[0], layer.self_attn.qkv)
        _linear(layer_spec.self_attention.linear[1], layer.self_attn.out)
        _norm(layer_spec.attention.layer_norm, layer.norm_cross)
        _linear(layer_spec.attention.linear[0], layer.cross_attn.q)
        _linear(layer_spec.attention.linear[1], layer.cross_attn.kv)
        _linear(layer_spec.attention.linear[2], layer.cross_attn.out)
        _ffn(layer_spec.ffn, layer.ffn)
    spec.register_source_vocabulary(vocab)
    spec.register_target_vocabulary(vocab)
    return spec


def save(
    model: Transformer, vocab: list[str], out_dir: str | Path, quantization: str | None
) -> Path:
    """Write the CTranslate2 model files (model.bin, config.json, vocabulary) to out_dir."""
    spec = to_spec(model, vocab)
    spec.validate()
    spec.optimize(quantization=quantization)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec.save(str(out))
    return out


def check(
    model: Transformer,
    model_dir: str | Path,
    vocab: list[str],
    pairs: list[tuple[list[int], list[int]]],
    compute_type: str,
) -> dict:
    """Compare CTranslate2 with PyTorch: max |log-prob difference| and greedy agreement."""
    translator = ctranslate2.Translator(
        str(model_dir), device="cpu", compute_type=compute_type, intra_threads=2
    )
    src_tokens = [[vocab[i] for i in s] for s, _ in pairs]
    tgt_tokens = [[vocab[i] for i in t] for _, t in pairs]
    scored = translator.score_batch(src_tokens, tgt_tokens, max_batch_size=64)
    ours = token_log_probs(model, pairs)
    diffs = [
        float(np.max(np.abs(np.array(r.log_probs) - o))) for r, o in zip(scored, ours, strict=False)
    ]
    limit = 2 * max(len(t) for _, t in pairs) + 10
    hyps = translator.translate_batch(
        src_tokens, beam_size=1, max_batch_size=64, max_decoding_length=limit
    )
    ct2_out = [h.hypotheses[0] for h in hyps]
    torch_out = [[vocab[i] for i in ids] for ids in greedy(model, [s for s, _ in pairs], limit)]
    same = sum(a == b for a, b in zip(ct2_out, torch_out, strict=False))
    return {
        "compute_type": compute_type,
        "pairs": len(pairs),
        "max_abs_logprob_diff": max(diffs),
        "mean_abs_logprob_diff_max": float(np.mean(diffs)),
        "greedy_agree": same,
    }
