"""A draft head on the target's features (EAGLE, Li et al. 2024): one decoder layer that reads the
target's last hidden state and the next token, and predicts the target's next hidden state.

At sequence slot j the head sees token x_j and the target's feature f_{j-1} (its final-normed
hidden state at position j - 1, the vector the target's LM head reads):

    u_j = fc([embed(x_j), f_{j-1}])             (2d -> d)
    h_j = norm(layer(u_<=j))                     one decoder layer (Llama, Qwen2), causal over the slots
    q(x_{j+1}) = softmax(h_j W_vocab^T)          the target's output rows (FR-Spec vocabulary)

h_j is trained to be f_j (regression) and its logits to be the target's distribution (distillation).

With ``feature_layers`` (EAGLE-3, Li et al. 2025) the feature is fused from a low, a middle and a
high layer of the target: g_{j-1} = f_{j-1} + fuse([rms(s_low), rms(s_mid)]) (2d -> d, no bias),
where s_i is the target's hidden state i in transformers' numbering (0 the embeddings, i the output
of layer i - 1, the last the final-normed state f) and rms a weightless RMS normalisation
(``layer_features``). EAGLE-3's fc over all three is this with its block on f fixed to I, which
loses nothing (``fc`` maps g linearly next) and saves a d x d matrix (the head's size budget).
``fuse`` starts at zero: the head then reads f alone, as an f-only head does.
Drafting further than one token feeds the head its own h_j in place of the feature it does not have
yet. The head shares the target's embeddings and output projection, so its files hold the fc and
one layer: ``config.json`` (a one-layer config of the target's architecture, marked ``"specvideo_draft_head": true``) and
``model.safetensors`` (fp16). ``LeanLlama(head.llama, vocab, fc=head.fc)`` runs it at decode time.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig, PreTrainedModel

from specvideo.text.models.shared_draft import write_weights
from specvideo.text.runtime.contract import LAYERS_KEY

HEAD_MARKER = "specvideo_draft_head"
INIT_KEY = "specvideo_init_layer"


def is_draft_head(path: str | os.PathLike) -> bool:
    try:
        return bool(json.loads((Path(path) / "config.json").read_text()).get(HEAD_MARKER))
    except (OSError, ValueError):
        return False


class DraftHead(nn.Module):
    """fc (2d -> d) and a one-layer causal LM of the target's architecture (Llama, Qwen2) sharing
    the target's embeddings and head."""

    def __init__(self, config: PretrainedConfig):
        super().__init__()
        if config.num_hidden_layers != 1:
            raise ValueError(f"a draft head has one decoder layer, got {config.num_hidden_layers}")
        d = config.hidden_size
        self.fc = nn.Linear(2 * d, d, bias=True)
        self.feature_layers = tuple(getattr(config, LAYERS_KEY, None) or ())
        self.fuse = nn.Linear((len(self.feature_layers) - 1) * d, d, bias=False) if self.feature_layers else None
        self.llama = AutoModelForCausalLM.from_config(config)

    @property
    def config(self) -> PretrainedConfig:
        return self.llama.config

    @classmethod
    def from_target(
        cls,
        target: PreTrainedModel,
        init_layer: int | None = None,
        intermediate_size: int | None = None,
        feature_layers: tuple[int, ...] | None = None,
    ) -> DraftHead:
        """A head of the target's width sharing its embeddings; its layer a copy of target layer
        ``init_layer`` (None: random), its norm the target's final norm, fc the sum of the
        embedding and the feature (a start that already passes both through). ``intermediate_size``
        narrows the MLP (a size budget) to the layer's ``intermediate_size`` strongest units.
        ``feature_layers`` (EAGLE-3; the last must be the final state) adds ``fuse`` (zero)."""
        config = copy.deepcopy(target.config)
        config.num_hidden_layers = 1
        if getattr(config, "layer_types", None):
            config.layer_types = config.layer_types[:1]
        if intermediate_size:
            config.intermediate_size = intermediate_size
        setattr(config, HEAD_MARKER, True)
        if feature_layers:
            if feature_layers[-1] != target.config.num_hidden_layers:
                raise ValueError(f"the last fused layer is the final state {target.config.num_hidden_layers}, got {feature_layers}")
            setattr(config, LAYERS_KEY, list(feature_layers))
        head = cls(config).to(target.dtype)
        d = config.hidden_size
        with torch.no_grad():
            if init_layer is not None:
                state = target.model.layers[init_layer].state_dict()
                head.llama.model.layers[0].load_state_dict(_narrow_mlp(state, config.intermediate_size))
                setattr(head.config, INIT_KEY, init_layer)
            head.llama.model.norm.load_state_dict(target.model.norm.state_dict())
            head.fc.weight.copy_(torch.cat([torch.eye(d), torch.eye(d)], dim=1))
            head.fc.bias.zero_()
            if head.fuse is not None:
                head.init_fuse()
        share_embeddings(head, target)
        return head

    def init_fuse(self) -> None:
        """fuse = 0: the fused feature is the final state f (an f-only head's input)."""
        with torch.no_grad():
            self.fuse.weight.zero_()

    def fused(self, features: torch.Tensor) -> torch.Tensor:
        """(B, T, n d) target features of ``layer_features`` -> (B, T, d) the head's input feature
        g = f + fuse(the lower layers) (for a head without ``feature_layers``: f, the last d)."""
        d = self.config.hidden_size
        f = features[..., -d:]
        if self.fuse is None:
            return f
        return f.to(self.fuse.weight.dtype) + self.fuse(features[..., :-d].to(self.fuse.weight.dtype))
    def forward(
        self, input_ids: torch.Tensor, features: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """input_ids (B, T) x_j, features (B, T, d) f_{j-1} (fused already) -> predicted features h (B, T, d)."""
        embeds = self.llama.model.embed_tokens(input_ids)  # (B, T, d)
        u = self.fc(torch.cat([embeds, features.to(embeds.dtype)], dim=-1))  # (B, T, d)
        return self.llama.model(inputs_embeds=u, attention_mask=attention_mask).last_hidden_state

    def trained_state(self) -> dict[str, torch.Tensor]:
        """fc (and fuse), the layer and the norm: everything but the shared embeddings and output rows."""
        return {k: v for k, v in self.state_dict().items() if "embed_tokens" not in k and "lm_head" not in k}


def _narrow_mlp(state: dict[str, torch.Tensor], width: int) -> dict[str, torch.Tensor]:
    """A decoder layer's state with its MLP cut to the ``width`` units of largest
    |gate row| * |up row| * |down column| (all of them when it is already that narrow)."""
    gate, up, down = (state[f"mlp.{n}_proj.weight"] for n in ("gate", "up", "down"))  # (I, d) (I, d) (d, I)
    if gate.shape[0] <= width:
        return state
    strength = gate.float().norm(dim=1) * up.float().norm(dim=1) * down.float().norm(dim=0)  # (I,)
    keep = strength.topk(width).indices.sort().values
    return {
        **state,
        "mlp.gate_proj.weight": gate[keep],
        "mlp.up_proj.weight": up[keep],
        "mlp.down_proj.weight": down[:, keep],
    }


def share_embeddings(head: DraftHead, target: PreTrainedModel) -> None:
    head.llama.model.embed_tokens.weight = target.get_input_embeddings().weight
    head.llama.lm_head.weight = target.get_output_embeddings().weight


def save_head(head: DraftHead, out: str | os.PathLike) -> Path:
    """config.json + model.safetensors (fp16) into ``out``, by temp dir and rename (files that are
    not ours, a README or a token ranking, stay)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.float16).contiguous() for k, v in head.trained_state().items()}
    return write_weights(out, state, {**head.config.to_dict(), HEAD_MARKER: True})


def load_head(path: str | os.PathLike, target: PreTrainedModel) -> DraftHead:
    """The head in ``path`` on the target's embeddings; a clear error for a mismatched target."""
    path = Path(path)
    config = AutoConfig.from_pretrained(path)
    layers = getattr(config, LAYERS_KEY, None)
    names = ("hidden_size", "vocab_size") + (("num_hidden_layers",) if layers else ())
    for name in names:
        mine = layers[-1] if name == "num_hidden_layers" else getattr(config, name)
        if mine != getattr(target.config, name, None):
            raise ValueError(
                f"the draft head in {path} reads its target's features and needs a target with "
                f"{name}={mine}, got {getattr(target.config, name, None)}"
            )
    with torch.device("meta"):  # no (V, d) tables of its own: it shares the target's
        head = DraftHead(config)
    head.llama.model.rotary_emb = type(head.llama.model.rotary_emb)(config=config)  # its tables, off meta
    state = load_file(path / "model.safetensors")
    missing, unexpected = head.load_state_dict(state, strict=False, assign=True)
    missing = [k for k in missing if "embed_tokens" not in k and "lm_head" not in k]
    if missing or unexpected:
        raise ValueError(
            f"the draft head weights in {path} do not match its config: missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    head = head.to(target.dtype)
    share_embeddings(head, target)
    return head.eval()
