"""A tiny random FLUX.2 [klein], built in code and saved in black-forest-labs/FLUX.2-klein-4B's layout (no hub, no
network).

Sizes follow diffusers' own fast test (``tests/pipelines/flux2/test_pipeline_flux2_klein.py``), keeping the real
model's geometry where the renderer depends on it: a four-level VAE (a side shrinks 8×, then 2×2 latents are packed:
sides are multiples of 16) and a text encoder deep enough for the hidden states the pipeline reads (layers 9, 18
and 27), so the pipeline runs with its own defaults. The tokenizer is a real Qwen2 byte-level BPE over a vocabulary
and merges written here, with a chat template in Qwen3's form.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tests.unit.render.tiny_sdxl import WORDS, bytes_to_unicode

TEXT_HIDDEN = 16
TEXT_LAYERS = 28  # the pipeline stacks hidden states 9, 18 and 27 (of 0..28)
READ_LAYERS = 3  # those three, side by side: the transformer's text input
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")
# Qwen3's template in short: each message between <|im_start|> and <|im_end|>, then the assistant's turn with an
# empty thought when thinking is off (how the pipeline calls it)
CHAT_TEMPLATE = (
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)


def qwen_tokenizer():
    """A Qwen2 BPE tokenizer: every byte character, the merges spelling ``WORDS`` alone and after a space
    (``Ġportrait``), and Qwen's special tokens (well under the text encoder's vocabulary)."""
    from transformers import Qwen2TokenizerFast

    vocab = list(bytes_to_unicode().values())
    merges: list[tuple[str, str]] = []
    space = bytes_to_unicode()[ord(" ")]
    for word in WORDS:
        pieces = list(word)
        while len(pieces) > 1:
            rule = (pieces[0], pieces[1])
            if rule not in merges:
                merges.append(rule)
                vocab.append(pieces[0] + pieces[1])
            pieces = [pieces[0] + pieces[1]] + pieces[2:]
        merges.append((space, word))
        vocab.append(space + word)
    ids = {token: i for i, token in enumerate(dict.fromkeys(vocab + list(SPECIAL_TOKENS)))}
    tokenizer = Qwen2TokenizerFast(vocab=ids, merges=merges, additional_special_tokens=list(SPECIAL_TOKENS[1:]))
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def save_flux2_klein(folder: Path) -> None:
    """A random FLUX.2 [klein] pipeline in the official layout (model_index.json, scheduler, text encoder, tokenizer,
    transformer, VAE), float32 files, step-distilled as the 4B is (``is_distilled``: no guidance pass)."""
    from diffusers import (
        AutoencoderKLFlux2,
        FlowMatchEulerDiscreteScheduler,
        Flux2KleinPipeline,
        Flux2Transformer2DModel,
    )
    from transformers import Qwen3Config, Qwen3ForCausalLM

    latent_channels = 2
    torch.manual_seed(5)
    transformer = Flux2Transformer2DModel(
        patch_size=1,
        in_channels=4 * latent_channels,  # the VAE's latents packed 2×2
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=READ_LAYERS * TEXT_HIDDEN,
        timestep_guidance_channels=32,
        axes_dims_rope=(4, 4, 4, 4),
        guidance_embeds=False,
    )
    text_encoder = Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=512,
            hidden_size=TEXT_HIDDEN,
            intermediate_size=16,
            num_hidden_layers=TEXT_LAYERS,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
            max_position_embeddings=512,
        )
    )
    vae = AutoencoderKLFlux2(
        block_out_channels=(4, 4, 4, 4),
        layers_per_block=1,
        latent_channels=latent_channels,
        norm_num_groups=2,
        sample_size=32,
    )
    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=True)
    pipeline = Flux2KleinPipeline(
        scheduler=scheduler,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=qwen_tokenizer(),
        transformer=transformer,
        is_distilled=True,
    )
    pipeline.save_pretrained(folder)
