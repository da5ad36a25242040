"""A small pre-norm Transformer in PyTorch, laid out to map one-to-one onto CTranslate2.

Self-attention uses a fused q/k/v projection and cross-attention a query projection plus
a fused k/v projection, exactly as ``ctranslate2.specs.TransformerSpec`` stores them.
Embeddings are scaled by sqrt(d_model) and added to a sinusoidal table from position 0.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from training.random_model import sinusoids

BOS, EOS = 1, 2
IGNORE = -100


@dataclass
class ModelConfig:
    """Shape of the Transformer."""

    vocab: int
    d_model: int = 128
    heads: int = 4
    ffn: int = 512
    enc_layers: int = 3
    dec_layers: int = 3
    eps: float = 1e-6
    max_len: int = 256


class Attention(nn.Module):
    """Multi-head attention with CTranslate2's projection layout."""

    def __init__(self, d: int, heads: int, cross: bool) -> None:
        super().__init__()
        self.heads, self.cross = heads, cross
        if cross:
            self.q = nn.Linear(d, d)
            self.kv = nn.Linear(d, 2 * d)
        else:
            self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, H, T, D/H)."""
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)

    def forward(
        self, x: torch.Tensor, mem: torch.Tensor | None, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Attend from x to itself or to mem; mask is additive or boolean (True = keep)."""
        if self.cross:
            q = self.q(x)
            k, v = self.kv(mem).chunk(2, dim=-1)
        else:
            q, k, v = self.qkv(x).chunk(3, dim=-1)
        y = F.scaled_dot_product_attention(
            self.split(q), self.split(k), self.split(v), attn_mask=mask
        )
        b, h, t, dh = y.shape
        return self.out(y.transpose(1, 2).reshape(b, t, h * dh))


class FeedForward(nn.Module):
    """Pre-norm ReLU feed-forward block."""

    def __init__(self, d: int, ffn: int, eps: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d, eps=eps)
        self.lin0 = nn.Linear(d, ffn)
        self.lin1 = nn.Linear(ffn, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return x plus the block's output."""
        return x + self.lin1(F.relu(self.lin0(self.norm(x))))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, both pre-norm."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(c.d_model, eps=c.eps)
        self.attn = Attention(c.d_model, c.heads, cross=False)
        self.ffn = FeedForward(c.d_model, c.ffn, c.eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Encode one layer."""
        return self.ffn(x + self.attn(self.norm(x), None, mask))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention, feed-forward, all pre-norm."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.norm_self = nn.LayerNorm(c.d_model, eps=c.eps)
        self.self_attn = Attention(c.d_model, c.heads, cross=False)
        self.norm_cross = nn.LayerNorm(c.d_model, eps=c.eps)
        self.cross_attn = Attention(c.d_model, c.heads, cross=True)
        self.ffn = FeedForward(c.d_model, c.ffn, c.eps)

    def forward(
        self, x: torch.Tensor, mem: torch.Tensor, self_mask: torch.Tensor, mem_mask: torch.Tensor
    ) -> torch.Tensor:
        """Decode one layer."""
        x = x + self.self_attn(self.norm_self(x), None, self_mask)
        x = x + self.cross_attn(self.norm_cross(x), mem, mem_mask)
        return self.ffn(x)


class Transformer(nn.Module):
    """Encoder-decoder with one embedding shared by source, target and output layer."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.config = c
        self.embed = nn.Embedding(c.vocab, c.d_model)
        nn.init.normal_(self.embed.weight, std=c.d_model**-0.5)
        self.register_buffer(
            "pos", torch.from_numpy(sinusoids(c.max_len, c.d_model)), persistent=False
        )
        self.encoder = nn.ModuleList(EncoderLayer(c) for _ in range(c.enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(c) for _ in range(c.dec_layers))
        self.enc_norm = nn.LayerNorm(c.d_model, eps=c.eps)
        self.dec_norm = nn.LayerNorm(c.d_model, eps=c.eps)
        self.out_bias = nn.Parameter(torch.zeros(c.vocab))

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """Scaled embeddings plus positions."""
        return self.embed(ids) * math.sqrt(self.config.d_model) + self.pos[: ids.shape[1]]

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return encoder states and the key mask (B, 1, 1, S), True = attend."""
        keep = torch.arange(src.shape[1])[None, :] < src_len[:, None]
        mask = keep[:, None, None, :]
        x = self.embed_tokens(src)
        for layer in self.encoder:
            x = layer(x, mask)
        return self.enc_norm(x), mask

    def decode(
        self, tgt_in: torch.Tensor, mem: torch.Tensor, mem_mask: torch.Tensor
    ) -> torch.Tensor:
        """Return logits for every target position."""
        t = tgt_in.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        x = self.embed_tokens(tgt_in)
        for layer in self.decoder:
            x = layer(x, mem, causal, mem_mask)
        return self.dec_norm(x) @ self.embed.weight.T + self.out_bias

    def forward(self, src, src_len, tgt_in):
        """Logits for teacher-forced decoding."""
        mem, mask = self.encode(src, src_len)
        return self.decode(tgt_in, mem, mask)


def make_batch(pairs: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, ...]:
    """Pad source and target id lists into (src, src_len, tgt_in, tgt_out)."""
    s_max = max(len(s) for s, _ in pairs)
    t_max = max(len(t) for _, t in pairs) + 1
    src = torch.zeros(len(pairs), s_max, dtype=torch.long)
    tgt_in = torch.zeros(len(pairs), t_max, dtype=torch.long)
    tgt_out = torch.full((len(pairs), t_max), IGNORE, dtype=torch.long)
    for i, (s, t) in enumerate(pairs):
        src[i, : len(s)] = torch.tensor(s)
        tgt_in[i, : len(t) + 1] = torch.tensor([BOS] + t)
        tgt_out[i, : len(t) + 1] = torch.tensor(t + [EOS])
    src_len = torch.tensor([len(s) for s, _ in pairs])
    return src, src_len, tgt_in, tgt_out


def batches(
    data: list[tuple[list[int], list[int]]], max_tokens: int, rng: random.Random
) -> list[list[tuple[list[int], list[int]]]]:
    """Shuffle, sort within large pools by length and cut into token-budget batches."""
    order = data[:]
    rng.shuffle(order)
    out = []
    pool = max_tokens * 50
    for start in range(0, len(order), pool):
        chunk = sorted(order[start : start + pool], key=lambda p: (len(p[1]), len(p[0])))
        batch: list = []
        longest = 0
        for p in chunk:
            longest = max(longest, len(p[0]), len(p[1]) + 1)
            if batch and longest * (len(batch) + 1) > max_tokens:
                out.append(batch)
                batch, longest = [], max(len(p[0]), len(p[1]) + 1)
            batch.append(p)
        if batch:
            out.append(batch)
    rng.shuffle(out)
    return out


@dataclass
class TrainConfig:
    """Optimisation settings."""

    steps: int = 2000
    max_tokens: int = 4000
    lr: float = 3e-3
    warmup: int = 100
    label_smoothing: float = 0.1
    max_minutes: float = 14.0
    seed: int = 0
    source_eos_rate: float = 0.5


def lr_at(step: int, t: TrainConfig, elapsed: float = 0.0) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak.

    Progress is the larger of the step share and the time share of the budget, so a
    run cut short by max_minutes on a busy machine still ends with a low learning rate.
    """
    if step < t.warmup:
        return t.lr * (step + 1) / t.warmup
    progress = max((step - t.warmup) / max(1, t.steps - t.warmup), elapsed / (t.max_minutes * 60))
    progress = min(1.0, progress)
    return t.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))


def with_source_eos(data, rate: float, rng: random.Random):
    """Append </s> to a share of the sources, so the model accepts both conventions."""
    return [(s + [EOS] if rng.random() < rate else s, t) for s, t in data]


def train(
    model: Transformer, data: list[tuple[list[int], list[int]]], t: TrainConfig, log=None
) -> dict:
    """Train model in place; return a summary (steps, seconds, last loss)."""
    torch.manual_seed(t.seed)
    rng = random.Random(t.seed)
    opt = torch.optim.Adam(model.parameters(), lr=t.lr, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    step, start, loss_avg, epoch = 0, time.time(), None, 0
    while step < t.steps:
        epoch += 1
        for batch in batches(with_source_eos(data, t.source_eos_rate, rng), t.max_tokens, rng):
            src, src_len, tgt_in, tgt_out = make_batch(batch)
            logits = model(src, src_len, tgt_in)
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]),
                tgt_out.reshape(-1),
                ignore_index=IGNORE,
                label_smoothing=t.label_smoothing,
            )
            for group in opt.param_groups:
                group["lr"] = lr_at(step, t, time.time() - start)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            loss_avg = loss.item() if loss_avg is None else 0.98 * loss_avg + 0.02 * loss.item()
            elapsed = time.time() - start
            if log and step % 100 == 0:
                log(f"step {step} epoch {epoch} loss {loss_avg:.3f} {elapsed:.0f}s")
            if step >= t.steps or elapsed > t.max_minutes * 60:
                return {
                    "steps": step,
                    "epochs": epoch,
                    "seconds": round(elapsed, 1),
                    "loss": round(loss_avg, 4),
                    "stopped_by_time": step < t.steps,
                }
    return {
        "steps": step,
        "epochs": epoch,
        "seconds": round(time.time() - start, 1),
        "loss": round(loss_avg, 4),
        "stopped_by_time": False,
    }


@torch.no_grad()
def greedy(model: Transformer, sources: list[list[int]], max_len: int = 128) -> list[list[int]]:
    """Greedy-decode id lists (without </s>) for each source."""
    model.eval()
    out: list[list[int]] = []
    for i in range(0, len(sources), 64):
        chunk = sources[i : i + 64]
        src, src_len, _, _ = make_batch([(s, []) for s in chunk])
        mem, mask = model.encode(src, src_len)
        ys = torch.full((len(chunk), 1), BOS, dtype=torch.long)
        done = torch.zeros(len(chunk), dtype=torch.bool)
        for _ in range(max_len):
            nxt = model.decode(ys, mem, mask)[:, -1].argmax(-1)
            ys = torch.cat([ys, nxt[:, None]], dim=1)
            done |= nxt == EOS
            if done.all():
                break
        for row in ys[:, 1:].tolist():
            out.append(row[: row.index(EOS)] if EOS in row else row)
    return out


@torch.no_grad()
def token_log_probs(
    model: Transformer, pairs: list[tuple[list[int], list[int]]]
) -> list[np.ndarray]:
    """Log-probabilities of each target token and the final </s>, as CTranslate2 scores them."""
    model.eval()
    result = []
    for i in range(0, len(pairs), 64):
        chunk = pairs[i : i + 64]
        src, src_len, tgt_in, tgt_out = make_batch(chunk)
        logp = model(src, src_len, tgt_in).log_softmax(-1)
        for j, (_, t) in enumerate(chunk):
            ids = tgt_out[j, : len(t) + 1]
            result.append(logp[j, torch.arange(len(t) + 1), ids].numpy())
    return result


def config_dict(c: ModelConfig) -> dict:
    """The model configuration as a plain dict."""
    return asdict(c)
