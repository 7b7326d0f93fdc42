#!/usr/bin/env python3
"""Builds a Kyutai Pocket TTS ONNX bundle in the KevinAHM v2 contract (docs/pocket-tts.md §3.1, §3.3) from PyTorch
modules written from the spec (§1), for benchmarks only.

  --config tiny --weights model.safetensors   the pocket-tiny fixture's dimensions, with given upstream-named weights
                                              (the correctness check: the result must pass `voxedge conformance`)
  --config full --seed N                      the real v2 sizes (FlowLM 1024 wide, 6 layers, 16 heads x 64, flow head
                                              512 x 6, full Mimi with inner_dim 32) with random weights
  --int8                                      also writes *_int8.onnx through shared/tools/quantize_int8.py

Writes text_conditioner.onnx, mimi_encoder.onnx (bos_before_voice baked in, like the v2 exporter),
variants/mimi_encoder_no_bos.onnx, flow_lm_main.onnx, flow_lm_flow.onnx, mimi_decoder.onnx, bundle.json (both state
manifests), bos_before_voice.npy and tokenizer.model (copied from --tokenizer).

Runs on Debian 12: apt-get install python3-torch python3-onnx python3-numpy (torch 1.13, onnx 1.12); use
/usr/bin/python3. No other package is needed (safetensors is read and written here).
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SHARED = os.path.abspath(os.path.join(REPO, "..", "shared"))

FLOW_CACHE = 1000  # static FlowLM KV positions (§3.1)
MIMI_CACHE = 1000  # Mimi ring-buffer capacity (§1.4)

# ---------------------------------------------------------------------------------------------------------------------
# Configurations (§1.1-§1.10 for full, fixtures/README.md "pocket-tiny" for tiny)


def make_config(name, flow_layers=None):
    if name == "tiny":
        cfg = dict(
            ldim=32, d_model=64, num_layers=2, num_heads=4, hidden_scale=4, max_period=10000.0,
            flow_dim=32, flow_depth=2, n_bins=4000,
            mimi=dict(dimension=32, n_filters=8, ratios=[6, 5, 4], kernel_size=7, residual_kernel_size=3,
                      last_kernel_size=3, compress=2, d_model=32, num_heads=2, num_layers=2, dim_feedforward=128,
                      context=250, inner_dim=32, outer_dim=32, sample_rate=24000, frame_rate=12.5),
        )
    elif name == "full":
        cfg = dict(
            ldim=32, d_model=1024, num_layers=6, num_heads=16, hidden_scale=4, max_period=10000.0,
            flow_dim=512, flow_depth=6, n_bins=4000,
            mimi=dict(dimension=512, n_filters=64, ratios=[6, 5, 4], kernel_size=7, residual_kernel_size=3,
                      last_kernel_size=3, compress=2, d_model=512, num_heads=8, num_layers=2, dim_feedforward=2048,
                      context=250, inner_dim=32, outer_dim=512, sample_rate=24000, frame_rate=12.5),
        )
    else:
        raise SystemExit(f"unknown config {name}")
    if flow_layers:
        cfg["num_layers"] = flow_layers
    return cfg


# ---------------------------------------------------------------------------------------------------------------------
# Shared math


def rope(x, pos, max_period):
    """Interleaved (GPT-J) rotary embedding (§1.9). x [B, T, H, D], pos float32 [T]."""
    B, T, H, D = x.shape
    ds = torch.arange(D // 2, dtype=torch.float32)
    freqs = torch.exp(ds * (-math.log(max_period) * 2.0 / D))
    ang = pos.view(-1, 1, 1) * freqs  # [T, 1, D/2]
    cos, sin = torch.cos(ang), torch.sin(ang)
    xp = x.view(B, T, H, D // 2, 2)
    xr, xi = xp[..., 0], xp[..., 1]
    outr = xr * cos - xi * sin
    outi = xr * sin + xi * cos
    return torch.stack([outr, outi], dim=-1).view(B, T, H, D)


def gelu(x):
    return F.gelu(x)  # exact (erf)


class Attn(nn.Module):
    def __init__(self, d, bias=False):
        super().__init__()
        self.in_proj = nn.Linear(d, 3 * d, bias=bias)
        self.out_proj = nn.Linear(d, d, bias=bias)


class LayerScale(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.scale = nn.Parameter(torch.full((d,), 0.01))


class TLayer(nn.Module):
    def __init__(self, d, ffn, layer_scale):
        super().__init__()
        self.self_attn = Attn(d)
        self.norm1 = nn.LayerNorm(d, eps=1e-5)
        self.norm2 = nn.LayerNorm(d, eps=1e-5)
        self.linear1 = nn.Linear(d, ffn, bias=False)
        self.linear2 = nn.Linear(ffn, d, bias=False)
        if layer_scale:
            self.layer_scale_1 = LayerScale(d)
            self.layer_scale_2 = LayerScale(d)
        self.has_ls = layer_scale

    def ffn(self, x):
        return self.linear2(gelu(self.linear1(x)))


class Transformer(nn.Module):
    def __init__(self, d, ffn, n, layer_scale):
        super().__init__()
        self.layers = nn.ModuleList([TLayer(d, ffn, layer_scale) for _ in range(n)])


# ---------------------------------------------------------------------------------------------------------------------
# Mimi (§1.2-§1.6)


class SConv(nn.Module):
    """Causal conv; state `previous` holds the last k_eff - stride inputs (§1.3)."""

    def __init__(self, cin, cout, k, stride=1, bias=True, groups=1, replicate=False):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, k, stride=stride, bias=bias, groups=groups)
        self.pad = k - stride
        self.replicate = replicate

    def offline(self, x):
        if self.pad > 0:
            if self.replicate:
                x = torch.cat([x[:, :, :1].expand(-1, -1, self.pad), x], dim=2)
            else:
                x = F.pad(x, (self.pad, 0))
        return self.conv(x)

    def stream(self, x, first, previous):
        xc = torch.cat([previous, x], dim=2) if self.pad > 0 else x
        y = self.conv(xc)
        new_prev = xc[:, :, xc.shape[2] - self.pad:] if self.pad > 0 else previous
        return y, torch.logical_and(first, torch.zeros_like(first)), new_prev  # keeps `first` a graph input


class SConvTr(nn.Module):
    """Streaming transposed conv with overlap-add partial, bias subtracted from the carried tail (§1.3)."""

    def __init__(self, cin, cout, k, stride, bias=True, groups=1):
        super().__init__()
        self.convtr = nn.ConvTranspose1d(cin, cout, k, stride=stride, bias=bias, groups=groups)
        self.k, self.s = k, stride

    def stream(self, x, partial):
        pt = self.k - self.s
        y = self.convtr(x)
        T = x.shape[2]
        head = y[:, :, :pt] + partial
        n = T * self.s
        rest = y[:, :, pt:]
        y = torch.cat([head, rest], dim=2)
        tail = y[:, :, n:]
        if self.convtr.bias is not None:
            tail = tail - self.convtr.bias.view(1, -1, 1)
        return y[:, :, :n], tail


class ResBlock(nn.Module):
    def __init__(self, dim, cfg):
        super().__init__()
        hidden = dim // cfg["compress"]
        self.block = nn.ModuleList([nn.ELU(), SConv(dim, hidden, cfg["residual_kernel_size"]), nn.ELU(),
                                    SConv(hidden, dim, 1)])


class SEANetEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        nf = cfg["n_filters"]
        mult = 1
        model = [SConv(1, nf, cfg["kernel_size"])]
        for r in reversed(cfg["ratios"]):
            model += [ResBlock(mult * nf, cfg), nn.ELU(), SConv(mult * nf, mult * nf * 2, 2 * r, stride=r)]
            mult *= 2
        model += [nn.ELU(), SConv(mult * nf, cfg["dimension"], cfg["last_kernel_size"])]
        self.model = nn.ModuleList(model)


class SEANetDecoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        nf = cfg["n_filters"]
        mult = 2 ** len(cfg["ratios"])
        model = [SConv(cfg["dimension"], mult * nf, cfg["kernel_size"])]
        for r in cfg["ratios"]:
            model += [nn.ELU(), SConvTr(mult * nf, mult * nf // 2, 2 * r, r), ResBlock(mult * nf // 2, cfg)]
            mult //= 2
        model += [nn.ELU(), SConv(nf, 1, cfg["last_kernel_size"])]
        self.model = nn.ModuleList(model)


class MimiTransformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.transformer = Transformer(cfg["d_model"], cfg["dim_feedforward"], cfg["num_layers"], True)


class Quantizer(nn.Module):
    def __init__(self, ldim, outer):
        super().__init__()
        self.output_proj = nn.Conv1d(ldim, outer, 1, bias=False)


class Downsample(nn.Module):
    def __init__(self, dim, inner):
        super().__init__()
        self.conv = SConv(dim, inner, 32, stride=16, bias=False, replicate=True)


class Upsample(nn.Module):
    def __init__(self, outer):
        super().__init__()
        self.convtr = SConvTr(outer, outer, 32, 16, bias=False, groups=outer)


class Mimi(nn.Module):
    def __init__(self, cfg, ldim):
        super().__init__()
        self.cfg = cfg
        self.encoder = SEANetEncoder(cfg)
        self.decoder = SEANetDecoder(cfg)
        self.encoder_transformer = MimiTransformer(cfg)
        self.decoder_transformer = MimiTransformer(cfg)
        self.quantizer = Quantizer(ldim, cfg["outer_dim"])
        self.downsample = Downsample(cfg["dimension"], cfg["inner_dim"])
        self.upsample = Upsample(cfg["outer_dim"])
        assert cfg["outer_dim"] == cfg["dimension"] == cfg["d_model"], "decoder path assumes outer_dim = dimension"


def mimi_layer_offline(layer, x, heads, context, max_period):
    """Whole-sequence Mimi transformer layer from position 0, keys visible iff 0 <= i - j < context."""
    B, T, C = x.shape
    D = C // heads
    h = layer.norm1(x)
    qkv = layer.self_attn.in_proj(h).view(B, T, 3, heads, D)
    pos = torch.arange(T, dtype=torch.int64)
    posf = pos.to(torch.float32)
    q, k, v = rope(qkv[:, :, 0], posf, max_period), rope(qkv[:, :, 1], posf, max_period), qkv[:, :, 2]
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(D)
    delta = pos.view(-1, 1) - pos.view(1, -1)
    allowed = (delta >= 0) & (delta < context)
    scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
    a = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(B, T, C)
    x = x + layer.layer_scale_1.scale * layer.self_attn.out_proj(a)
    return x + layer.layer_scale_2.scale * layer.ffn(layer.norm2(x))


def mimi_layer_stream(layer, x, cache, end_offset, offset, heads, context, max_period):
    """Streaming Mimi transformer layer over a ring cache [2, B, H, cap, D]; positions are absolute (§1.4, §1.9)."""
    B, T, C = x.shape
    D = C // heads
    cap = cache.shape[3]
    h = layer.norm1(x)
    qkv = layer.self_attn.in_proj(h).view(B, T, 3, heads, D)
    off = offset[0]
    qpos = off + torch.arange(T, dtype=torch.int64)
    qposf = qpos.to(torch.float32)
    q, k, v = rope(qkv[:, :, 0], qposf, max_period), rope(qkv[:, :, 1], qposf, max_period), qkv[:, :, 2]
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, T, D]
    # Absolute position held by each old slot; negative = never written.
    slots = torch.arange(cap, dtype=torch.int64)
    last = off - 1
    slot_pos = last - torch.remainder(last - slots + cap, cap)
    keys = torch.cat([cache[0], k], dim=2)
    vals = torch.cat([cache[1], v], dim=2)
    kpos = torch.cat([slot_pos, qpos], dim=0)
    kvalid = torch.cat([slot_pos >= 0, torch.ones_like(qpos, dtype=torch.bool)], dim=0)
    delta = qpos.view(-1, 1) - kpos.view(1, -1)
    allowed = (delta >= 0) & (delta < context) & kvalid.view(1, -1)
    scores = torch.matmul(q, keys.transpose(2, 3)) / math.sqrt(D)
    scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
    a = torch.matmul(torch.softmax(scores, dim=-1), vals).transpose(1, 2).reshape(B, T, C)
    x = x + layer.layer_scale_1.scale * layer.self_attn.out_proj(a)
    x = x + layer.layer_scale_2.scale * layer.ffn(layer.norm2(x))
    # Ring write of the last min(T, cap) keys/values.
    kv = torch.stack([k, v], dim=0)[:, :, :, -cap:]
    tt = kv.shape[3]
    end = off + T
    wpos = end - tt + torch.arange(tt, dtype=torch.int64)
    # Index assignment exports as ScatterND, as upstream's ring write does (the runtime reads its writes).
    new_cache = cache.clone()
    new_cache[:, :, :, torch.remainder(wpos, cap)] = kv
    return x, new_cache, end_offset + T, offset + T


# ---------------------------------------------------------------------------------------------------------------------
# FlowLM (§1.7, §1.8, §1.10)


class TimestepEmbedder(nn.Module):
    def __init__(self, w, nfreq=256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(nfreq, w), nn.SiLU(), nn.Linear(w, w), RMSNorm(w))
        half = nfreq // 2
        self.register_buffer("freqs", torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half))

    def forward(self, tau, freqs):
        ang = tau * freqs  # [B, 1] x [128]
        return self.mlp(torch.cat([torch.cos(ang), torch.sin(ang)], dim=-1))


class RMSNorm(nn.Module):
    """y = x * alpha / sqrt(var_unbiased(x) + 1e-5); x itself not centred (§1.10)."""

    def __init__(self, d):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(d))
        self.d = d

    def forward(self, x):
        n = self.d
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).sum(dim=-1, keepdim=True) / (n - 1)
        return x * self.alpha / torch.sqrt(var + 1e-5)


class ResBlockAdaLN(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.in_ln = nn.LayerNorm(w, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(w, w), nn.SiLU(), nn.Linear(w, w))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(w, 3 * w))

    def forward(self, h, y):
        shift, scale, gate = self.adaLN_modulation(y).chunk(3, dim=-1)
        u = self.in_ln(h) * (1 + scale) + shift
        return h + gate * self.mlp(u)


class FinalLayer(nn.Module):
    def __init__(self, w, out):
        super().__init__()
        self.w = w
        self.linear = nn.Linear(w, out)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(w, 2 * w))

    def forward(self, h, y):
        shift, scale = self.adaLN_modulation(y).chunk(2, dim=-1)
        h = F.layer_norm(h, (self.w,), eps=1e-6) * (1 + scale) + shift
        return self.linear(h)


class FlowNet(nn.Module):
    def __init__(self, cond, w, depth, ldim):
        super().__init__()
        self.time_embed = nn.ModuleList([TimestepEmbedder(w), TimestepEmbedder(w)])
        self.cond_embed = nn.Linear(cond, w)
        self.input_proj = nn.Linear(ldim, w)
        self.res_blocks = nn.ModuleList([ResBlockAdaLN(w) for _ in range(depth)])
        self.final_layer = FinalLayer(w, ldim)

    def forward(self, c, s, t, x):
        f0 = self.time_embed[0].freqs
        # Identical buffers would be deduplicated by the exporter into Identity nodes (§7.6); share one instead.
        f1 = f0 if torch.equal(self.time_embed[0].freqs, self.time_embed[1].freqs) else self.time_embed[1].freqs
        y = (self.time_embed[0](s, f0) + self.time_embed[1](t, f1)) / 2 + self.cond_embed(c)
        h = self.input_proj(x)
        for block in self.res_blocks:
            h = block(h, y)
        return self.final_layer(h, y)


class Conditioner(nn.Module):
    def __init__(self, n_bins, d):
        super().__init__()
        self.embed = nn.Embedding(n_bins + 1, d)


class FlowLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, ldim = cfg["d_model"], cfg["ldim"]
        self.conditioner = Conditioner(cfg["n_bins"], d)
        self.bos_emb = nn.Parameter(torch.zeros(ldim))
        self.input_linear = nn.Linear(ldim, d, bias=False)
        self.transformer = Transformer(d, d * cfg["hidden_scale"], cfg["num_layers"], False)
        self.out_norm = nn.LayerNorm(d, eps=1e-5)
        self.out_eos = nn.Linear(d, 1)
        self.flow_net = FlowNet(d, cfg["flow_dim"], cfg["flow_depth"], ldim)
        self.register_buffer("emb_std", torch.ones(ldim))
        self.register_buffer("emb_mean", torch.zeros(ldim))
        self.speaker_proj_weight = nn.Parameter(torch.zeros(d, cfg["mimi"]["inner_dim"]))
        self.bos_before_voice = nn.Parameter(torch.zeros(1, 1, d))


class TTSModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.flow_lm = FlowLM(cfg)
        self.mimi = Mimi(cfg["mimi"], cfg["ldim"])


def flow_layer_stream(layer, x, cache, step, heads, max_period):
    """FlowLM layer over the static cache [2, B, P, H, D]: write at step..step+L, attend causally to 0..step+L."""
    B, L, C = x.shape
    D = C // heads
    h = layer.norm1(x)
    qkv = layer.self_attn.in_proj(h).view(B, L, 3, heads, D)
    s0 = step[0]  # 0-d: rank-1 Slice bounds under torch 1.13 (§7.5)
    pos = s0 + torch.arange(L, dtype=torch.int64)
    posf = pos.to(torch.float32)
    q, k, v = rope(qkv[:, :, 0], posf, max_period), rope(qkv[:, :, 1], posf, max_period), qkv[:, :, 2]
    end = s0 + L
    # Slice assignment, as upstream's export writes the cache: it exports as ScatterND(ScatterND(cache, k), v),
    # the pattern the published graphs have and the runtime's cache writes are read from.
    new_cache = cache.clone()
    new_cache[0, :, s0:end] = k
    new_cache[1, :, s0:end] = v
    keys = new_cache[0, :, :end].transpose(1, 2)  # [B, H, end, D]
    vals = new_cache[1, :, :end].transpose(1, 2)
    scores = torch.matmul(q.transpose(1, 2), keys.transpose(2, 3)) / math.sqrt(D)
    kpos = torch.arange(end, dtype=torch.int64)
    allowed = kpos.view(1, -1) <= pos.view(-1, 1)
    scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
    a = torch.matmul(torch.softmax(scores, dim=-1), vals).transpose(1, 2).reshape(B, L, C)
    x = x + layer.self_attn.out_proj(a)
    x = x + layer.ffn(layer.norm2(x))
    return x, new_cache, step + L


# ---------------------------------------------------------------------------------------------------------------------
# State manifests (§3.1, §3.3): sorted module names, then sorted keys.


def natural_states_flow(cfg):
    H, D = cfg["num_heads"], cfg["d_model"] // cfg["num_heads"]
    mods = sorted(f"transformer.layers.{i}.self_attn" for i in range(cfg["num_layers"]))
    out = []
    for m in mods:
        out.append((m, "cache", "float32", [2, 1, FLOW_CACHE, H, D], "nan"))
        out.append((m, "current_end", "float32", [0], "empty"))
        out.append((m, "step", "int64", [1], "zeros"))
    return out


def natural_states_mimi(mimi):
    cfg = mimi.cfg
    H, D = cfg["num_heads"], cfg["d_model"] // cfg["num_heads"]
    entries = {}
    for name, mod in mimi.named_modules():
        if isinstance(mod, SConv):
            c = mod.conv.in_channels
            entries[name] = [("first", "bool", [1], "ones"),
                             ("previous", "float32", [1, c, mod.pad], "zeros" if mod.pad else "empty")]
        elif isinstance(mod, SConvTr):
            entries[name] = [("partial", "float32", [1, mod.convtr.out_channels, mod.k - mod.s], "zeros")]
        elif isinstance(mod, Attn):
            entries[name] = [("cache", "float32", [2, 1, H, MIMI_CACHE, D], "zeros"),
                             ("end_offset", "int64", [1], "zeros"), ("offset", "int64", [1], "zeros")]
    out = []
    for m in sorted(entries):
        for key, dt, shape, fill in sorted(entries[m]):
            out.append((m, key, dt, shape, fill))
    return out


def manifest_json(states):
    return [dict(index=i, input_name=f"state_{i}", output_name=f"out_state_{i}", module=m, key=k, path=f"{m}/{k}",
                 dtype=dt, shape=list(shape), fill=fill) for i, (m, k, dt, shape, fill) in enumerate(states)]


def initial_state(dt, shape, fill):
    if dt == "bool":
        return torch.ones(shape, dtype=torch.bool) if fill == "ones" else torch.zeros(shape, dtype=torch.bool)
    if dt == "int64":
        return torch.zeros(shape, dtype=torch.int64)
    if fill == "nan":
        return torch.full(shape, float("nan"))
    return torch.zeros(shape)


# ---------------------------------------------------------------------------------------------------------------------
# Export wrappers


class TextConditionerW(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.conditioner = m.flow_lm.conditioner

    def forward(self, token_ids):
        return self.conditioner.embed(token_ids)


class FlowW(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.flow_net = m.flow_lm.flow_net

    def forward(self, c, s, t, x):
        return self.flow_net(c, s, t, x)


class FlowMainW(nn.Module):
    def __init__(self, m, states):
        super().__init__()
        self.flow_lm = m.flow_lm
        self.heads, self.max_period = m.cfg["num_heads"], m.cfg["max_period"]
        self.states = states
        layers = {f"transformer.layers.{i}.self_attn": i for i in range(m.cfg["num_layers"])}
        self.slot = {}  # layer index -> (cache idx, current_end idx, step idx) in state order
        for i, (mod, key, *_rest) in enumerate(states):
            self.slot.setdefault(layers[mod], {})[key] = i

    def forward(self, sequence, text_embeddings, *state):
        fl = self.flow_lm
        seq = torch.where(torch.isnan(sequence), fl.bos_emb.view(1, 1, -1).expand_as(sequence), sequence)
        x = torch.cat([text_embeddings, fl.input_linear(seq)], dim=1)
        out = list(state)
        for li, layer in enumerate(fl.transformer.layers):
            sl = self.slot[li]
            x, cache, step = flow_layer_stream(layer, x, state[sl["cache"]], state[sl["step"]], self.heads,
                                               self.max_period)
            out[sl["cache"]], out[sl["step"]] = cache, step
        h = fl.out_norm(x)
        L, S = h.shape[1], sequence.shape[1]
        idx = (L - S) % L  # first position of h[:, -S:], i.e. the last with S = 1 (§3.1)
        cond = h[:, idx]
        eos = fl.out_eos(cond)
        return (cond, eos, *out)


class DecoderW(nn.Module):
    def __init__(self, m, states):
        super().__init__()
        self.mimi = m.mimi
        self.emb_std = nn.Parameter(m.flow_lm.emb_std.clone())
        self.emb_mean = nn.Parameter(m.flow_lm.emb_mean.clone())
        self.index = {(mod, key): i for i, (mod, key, *_r) in enumerate(states)}
        self.cfg = m.mimi.cfg

    def forward(self, latent, *state):
        st = self.index
        out = list(state)
        mimi = self.mimi

        def conv(name, mod, x):
            y, f, p = mod.stream(x, state[st[(name, "first")]], state[st[(name, "previous")]])
            out[st[(name, "first")]], out[st[(name, "previous")]] = f, p
            return y

        def convtr(name, mod, x):
            y, p = mod.stream(x, state[st[(name, "partial")]])
            out[st[(name, "partial")]] = p
            return y

        z = latent * self.emb_std + self.emb_mean
        x = mimi.quantizer.output_proj(z.transpose(1, 2))
        x = convtr("upsample.convtr", mimi.upsample.convtr, x)
        h = x.transpose(1, 2)
        for i, layer in enumerate(mimi.decoder_transformer.transformer.layers):
            n = f"decoder_transformer.transformer.layers.{i}.self_attn"
            h, c, e, o = mimi_layer_stream(layer, h, state[st[(n, "cache")]], state[st[(n, "end_offset")]],
                                           state[st[(n, "offset")]], self.cfg["num_heads"], self.cfg["context"],
                                           10000.0)
            out[st[(n, "cache")]], out[st[(n, "end_offset")]], out[st[(n, "offset")]] = c, e, o
        x = h.transpose(1, 2)
        for i, mod in enumerate(mimi.decoder.model):
            name = f"decoder.model.{i}"
            if isinstance(mod, nn.ELU):
                x = F.elu(x)
            elif isinstance(mod, SConv):
                x = conv(name, mod, x)
            elif isinstance(mod, SConvTr):
                x = convtr(name, mod, x)
            else:
                r = F.elu(x)
                r = conv(f"{name}.block.1", mod.block[1], r)
                r = F.elu(r)
                r = conv(f"{name}.block.3", mod.block[3], r)
                x = x + r
        return (x, *out)


class EncoderW(nn.Module):
    def __init__(self, m, with_bos):
        super().__init__()
        self.mimi = m.mimi
        self.speaker_proj_weight = m.flow_lm.speaker_proj_weight
        self.with_bos = with_bos
        if with_bos:
            self.bos_before_voice = m.flow_lm.bos_before_voice
        self.cfg = m.mimi.cfg

    def forward(self, audio):
        frame = int(self.cfg["sample_rate"] / self.cfg["frame_rate"])
        n = audio.shape[2]
        frames = (n + frame - 1) // frame
        pad = torch.zeros(1, 1, frames * frame - n, dtype=audio.dtype)  # right-pad to 1920*k inside the graph
        x = torch.cat([audio, pad], dim=2)
        for mod in self.mimi.encoder.model:
            if isinstance(mod, nn.ELU):
                x = F.elu(x)
            elif isinstance(mod, SConv):
                x = mod.offline(x)
            else:
                x = x + mod.block[3].offline(F.elu(mod.block[1].offline(F.elu(x))))
        h = x.transpose(1, 2)
        for layer in self.mimi.encoder_transformer.transformer.layers:
            h = mimi_layer_offline(layer, h, self.cfg["num_heads"], self.cfg["context"], 10000.0)
        lat = self.mimi.downsample.conv.offline(h.transpose(1, 2))  # [1, inner, T]
        cond = F.linear(lat.transpose(1, 2), self.speaker_proj_weight)
        if self.with_bos:
            cond = torch.cat([self.bos_before_voice, cond], dim=1)
        return cond


# ---------------------------------------------------------------------------------------------------------------------
# safetensors (no dependency)

_ST_DT = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "BF16": np.uint16}


def read_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        a = np.frombuffer(b, dtype=_ST_DT[v["dtype"]], offset=8 + n + s, count=(e - s) // np.dtype(_ST_DT[v["dtype"]]).itemsize)
        if v["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[k] = torch.from_numpy(a.astype(np.float32 if v["dtype"] != "I64" else np.int64).reshape(v["shape"]))
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        a = tensors[k].detach().cpu().numpy()
        dt = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}[a.dtype]
        raw = np.ascontiguousarray(a).tobytes()
        header[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for raw in blobs:
            f.write(raw)


# ---------------------------------------------------------------------------------------------------------------------
# Random weights, after fixtures/README.md "Weights" (std 1.2/sqrt(fan_in) in Mimi, every 1-D parameter randomised)


@torch.no_grad()
def randomise(model, seed, eos_bias):
    g = torch.Generator().manual_seed(seed)
    randn = lambda *s: torch.randn(*s, generator=g)
    for name, p in model.named_parameters():
        if name.startswith("mimi."):
            if p.dim() >= 2:
                parent = model.get_submodule(name.rsplit(".", 1)[0])
                if isinstance(parent, nn.ConvTranspose1d):
                    fan_in = parent.in_channels // parent.groups * parent.kernel_size[0] / parent.stride[0]
                else:
                    fan_in = p[0].numel()
                std = 1.2 / math.sqrt(fan_in)
                if name.startswith("mimi.decoder.model.11."):
                    std *= 0.15
                p.copy_(randn(*p.shape) * std)
            elif name.endswith("layer_scale_1.scale") or name.endswith("layer_scale_2.scale"):
                p.copy_(0.1 + 0.3 * torch.rand(p.shape, generator=g))
            elif ".norm" in name and name.endswith(".weight"):
                p.copy_(1 + 0.2 * randn(*p.shape))
            elif ".norm" in name:
                p.copy_(0.1 * randn(*p.shape))
            else:  # conv biases
                p.copy_(0.07 * randn(*p.shape) * (0.15 if "model.11." in name else 1.0))
        else:
            if name == "flow_lm.conditioner.embed.weight" or name.endswith("bos_emb") or name.endswith("bos_before_voice"):
                p.copy_(randn(*p.shape))
            elif name.endswith("speaker_proj_weight"):
                p.copy_(randn(*p.shape) / math.sqrt(p.shape[1]))
            elif p.dim() >= 2:
                bound = 1 / math.sqrt(p.shape[1])  # PyTorch default Linear init
                p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * bound)
            elif name.endswith("alpha") or ((".norm" in name or "in_ln" in name or "out_norm" in name) and name.endswith("weight")):
                p.copy_(1 + 0.2 * randn(*p.shape))
            elif ".norm" in name or "in_ln" in name or "out_norm" in name:
                p.copy_(0.1 * randn(*p.shape))
            else:  # linear biases
                fan_in = model.get_submodule(name.rsplit(".", 1)[0]).in_features
                p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) / math.sqrt(fan_in) + 0.05 * randn(*p.shape))
    fl = model.flow_lm
    fl.emb_std.copy_(0.5 + torch.rand(fl.emb_std.shape, generator=g))
    fl.emb_mean.copy_(0.2 * randn(*fl.emb_mean.shape))
    fl.out_eos.bias.add_(eos_bias)


# ---------------------------------------------------------------------------------------------------------------------
# Export


def export(module, args, path, inputs, outputs, dynamic, opset):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, input_names=inputs, output_names=outputs, dynamic_axes=dynamic,
                          opset_version=opset, do_constant_folding=True)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=["tiny", "full"], required=True)
    ap.add_argument("--weights", help="upstream-named model.safetensors (strict load); omitted: random weights")
    ap.add_argument("--partial", action="store_true",
                    help="with --weights: load the tensors the file has over random weights (e.g. mimi-full's decoder)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flow-layers", type=int, help="override the FlowLM depth (e.g. 24 for the *_24l models)")
    ap.add_argument("--eos-bias", type=float, default=-10.0,
                    help="added to the random out_eos bias (default -10: EOS never fires, so runs hit max frames)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", help="bundle_name / language in bundle.json")
    ap.add_argument("--tokenizer", default=os.path.join(SHARED, "fixtures", "pocket-tiny", "tokenizer.model"))
    ap.add_argument("--int8", action="store_true", help="also write *_int8.onnx via quantize_int8.py")
    ap.add_argument("--quantizer", default=os.path.join(SHARED, "tools", "quantize_int8.py"))
    ap.add_argument("--save-weights", action="store_true", help="also write model.safetensors (upstream names)")
    ap.add_argument("--only", help="comma list of graphs to export (text,flow,main,decoder,encoder)")
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    cfg = make_config(a.config, a.flow_layers)
    t0 = time.time()
    model = TTSModel(cfg).eval()
    if a.weights and a.partial:
        randomise(model, a.seed, a.eos_bias)
    if a.weights:
        sd = read_safetensors(a.weights)
        missing, unexpected = model.load_state_dict(sd, strict=False)
        if unexpected or (missing and not a.partial):
            raise SystemExit(f"weights do not match the {a.config} config: missing {missing}, unexpected {unexpected}")
        log(f"loaded {len(sd)} tensors from {a.weights}")
    else:
        randomise(model, a.seed, a.eos_bias)
        log(f"random weights, seed {a.seed}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")
    for p in model.parameters():
        p.requires_grad_(False)
    os.makedirs(a.out, exist_ok=True)
    only = set(a.only.split(",")) if a.only else {"text", "flow", "main", "decoder", "encoder"}
    d, ldim = cfg["d_model"], cfg["ldim"]
    flow_states = natural_states_flow(cfg)
    mimi_states = natural_states_mimi(model.mimi)
    written = []

    def out(name):
        path = os.path.join(a.out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        written.append(name)
        return path

    with torch.no_grad():
        if "text" in only:
            export(TextConditionerW(model), (torch.tensor([[1, 2, 3]], dtype=torch.int64),), out("text_conditioner.onnx"),
                   ["token_ids"], ["embeddings"], {"token_ids": {1: "seq_len"}, "embeddings": {1: "seq_len"}}, 14)
            log("text_conditioner.onnx")
        if "flow" in only:
            B = 2
            export(FlowW(model), (torch.randn(B, d), torch.rand(B, 1), torch.rand(B, 1), torch.randn(B, ldim)),
                   out("flow_lm_flow.onnx"), ["c", "s", "t", "x"], ["flow_dir"],
                   {k: {0: "batch"} for k in ["c", "s", "t", "x", "flow_dir"]}, 14)
            log("flow_lm_flow.onnx")
        if "main" in only:
            states = [initial_state(dt, shape, "zeros" if fill == "nan" else fill) for _m, _k, dt, shape, fill in flow_states]
            for i, (_m, k, *_r) in enumerate(flow_states):
                if k == "step":
                    states[i] = torch.tensor([3], dtype=torch.int64)
            names = [f"state_{i}" for i in range(len(states))]
            onames = [f"out_state_{i}" for i in range(len(states))]
            export(FlowMainW(model, flow_states), (torch.randn(1, 1, ldim), torch.randn(1, 2, d), *states),
                   out("flow_lm_main.onnx"), ["sequence", "text_embeddings", *names], ["conditioning", "eos_logit", *onames],
                   {"sequence": {1: "seq_len"}, "text_embeddings": {1: "text_len"}}, 14)
            log("flow_lm_main.onnx")
        if "decoder" in only:
            states = [initial_state(dt, shape, fill) for _m, _k, dt, shape, fill in mimi_states]
            names = [f"state_{i}" for i in range(len(states))]
            onames = [f"out_state_{i}" for i in range(len(states))]
            export(DecoderW(model, mimi_states), (torch.randn(1, 2, ldim), *states), out("mimi_decoder.onnx"),
                   ["latent", *names], ["audio_frame", *onames], {"latent": {1: "seq_len"}, "audio_frame": {2: "samples"}}, 17)
            log("mimi_decoder.onnx")
        if "encoder" in only:
            audio = torch.randn(1, 1, 1920 * 3 - 100) * 0.1
            export(EncoderW(model, True), (audio,), out("mimi_encoder.onnx"), ["audio"], ["latents"],
                   {"audio": {2: "audio_len"}, "latents": {1: "frames"}}, 17)
            export(EncoderW(model, False), (audio,), out("variants/mimi_encoder_no_bos.onnx"), ["audio"], ["latents"],
                   {"audio": {2: "audio_len"}, "latents": {1: "frames"}}, 17)
            log("mimi_encoder.onnx, variants/mimi_encoder_no_bos.onnx")

    np.save(out("bos_before_voice.npy"), model.flow_lm.bos_before_voice.detach().numpy().astype(np.float32))
    shutil.copyfile(a.tokenizer, out("tokenizer.model"))
    name = a.name or f"random-{a.config}"
    bundle = {
        "schema_version": 2, "bundle_name": name, "language": name,
        "sample_rate": 24000, "frame_rate": 12.5, "samples_per_frame": 1920,
        "latent_dim": ldim, "conditioning_dim": d,
        "pad_with_spaces_for_short_inputs": False, "remove_semicolons": False,
        "model_recommended_frames_after_eos": None, "max_token_per_chunk": 50, "insert_bos_before_voice": True,
        "tokenizer_file": "tokenizer.model", "bos_before_voice_file": "bos_before_voice.npy",
        "predefined_voices": [],
        "flow_lm_state_manifest": manifest_json(flow_states),
        "mimi_state_manifest": manifest_json(mimi_states),
    }
    with open(out("bundle.json"), "w") as f:
        f.write(json.dumps(bundle, indent=2, sort_keys=True) + "\n")
    if a.save_weights:
        write_safetensors(out("model.safetensors"), model.state_dict())
    if a.int8:
        for stem in ["flow_lm_main", "flow_lm_flow", "mimi_decoder"]:
            src = os.path.join(a.out, f"{stem}.onnx")
            if not os.path.exists(src):
                continue
            extra = ["--gemm2matmul"] if stem == "flow_lm_flow" else []
            subprocess.run([sys.executable, a.quantizer, src, out(f"{stem}_int8.onnx"), *extra], check=True)
    log(f"done in {time.time() - t0:.1f} s:")
    for name in written:
        print(f"  {name}  {os.path.getsize(os.path.join(a.out, name)):,} B")


if __name__ == "__main__":
    main()
