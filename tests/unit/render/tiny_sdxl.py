"""Tiny random SDXL parts, built in code and saved in the official repositories' layouts (no hub, no network), and
the folder mirror that holds them beside a tiny FLUX.2 [klein] (``tiny_flux2.py``).

Sizes follow diffusers' own fast tests (``get_dummy_components`` of the SDXL and SDXL ControlNet tests), smaller
still; the tokenizers are real CLIP BPE tokenizers over a vocabulary and merges written here.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import torch
import yaml

SDXL = "sdxl-tiny"
INSTRUCT = "sdxl-instruct-tiny"
CONTROLNET = "controlnet-tiny"
LORA = "lora-tiny"
LORA_B = "lora-tiny-b"  # a second look: two LoRA sets to multiplex
ADAPTER = "ip-adapter-tiny"
ADAPTER_FILE = "sdxl_models/ip-adapter_tiny.safetensors"
FLUX2 = "flux2-klein-tiny"  # built by tiny_flux2.py
BLOCKS = (8, 16)
HEADS = (2, 4)
TEXT_HIDDEN = 32
# the UNet's added conditioning: 6 size/crop numbers of addition_time_embed_dim each, plus text_encoder_2's pooled
ADD_TIME_DIM = 8
PROJECTION_INPUT = 6 * ADD_TIME_DIM + TEXT_HIDDEN
WORDS = ("a", "portrait", "of", "smiling", "woman", "man", "in", "suit", "red", "blue", "studio", "light", "photo")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte→character map (CLIP's BPE runs over these characters)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars)))


def write_clip_vocab(folder: Path) -> tuple[Path, Path]:
    """A CLIP BPE vocabulary: every byte character alone and word-final, the merges spelling ``WORDS``, and the
    special tokens (well under the text encoders' 1000 ids)."""
    folder.mkdir(parents=True, exist_ok=True)
    chars = list(bytes_to_unicode().values())
    vocab = chars + [c + "</w>" for c in chars]
    merges: list[str] = []
    for word in WORDS:
        pieces = list(word[:-1]) + [word[-1] + "</w>"]
        while len(pieces) > 1:
            merged = pieces[0] + pieces[1]
            rule = f"{pieces[0]} {pieces[1]}"
            if rule not in merges:
                merges.append(rule)
                vocab.append(merged)
            pieces = [merged] + pieces[2:]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    vocab_file, merges_file = folder / "vocab.json", folder / "merges.txt"
    vocab_file.write_text(json.dumps({token: i for i, token in enumerate(dict.fromkeys(vocab))}), encoding="utf-8")
    merges_file.write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    return vocab_file, merges_file


def _tokenizer(scratch: Path):
    from transformers import CLIPTokenizer

    vocab_file, merges_file = write_clip_vocab(scratch)
    return CLIPTokenizer(vocab_file=str(vocab_file), merges_file=str(merges_file), pad_token="!", model_max_length=77)


def _text_config():
    from transformers import CLIPTextConfig

    return CLIPTextConfig(
        bos_token_id=0,
        eos_token_id=2,
        hidden_size=TEXT_HIDDEN,
        intermediate_size=37,
        layer_norm_eps=1e-05,
        num_attention_heads=4,
        num_hidden_layers=2,
        pad_token_id=1,
        vocab_size=1000,
        hidden_act="gelu",
        projection_dim=TEXT_HIDDEN,
    )


def _unet(in_channels: int = 4):
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        block_out_channels=BLOCKS,
        layers_per_block=1,
        sample_size=16,
        in_channels=in_channels,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=HEADS,
        use_linear_projection=True,
        addition_embed_type="text_time",
        addition_time_embed_dim=ADD_TIME_DIM,
        transformer_layers_per_block=(1, 1),
        projection_class_embeddings_input_dim=PROJECTION_INPUT,
        cross_attention_dim=2 * TEXT_HIDDEN,
        norm_num_groups=1,
    )


def save_sdxl(folder: Path, *, instruct: bool = False) -> None:
    """A random SDXL pipeline in the official layout (model_index.json, scheduler, two text encoders and tokenizers,
    UNet, VAE), float32 files without a variant. The tokenizers keep the official repository's files (vocab.json and
    merges.txt beside tokenizer_config.json, no tokenizer.json), so loading runs transformers' conversion as it
    will on the real files. ``instruct``: InstructPix2Pix's layout (diffusers/sdxl-instructpix2pix-768: its UNet
    takes the start image's latents beside the noise, 8 channels in)."""
    from diffusers import (
        AutoencoderKL,
        EulerDiscreteScheduler,
        StableDiffusionXLInstructPix2PixPipeline,
        StableDiffusionXLPipeline,
    )
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    torch.manual_seed(0)
    unet = _unet(8 if instruct else 4)
    vae = AutoencoderKL(
        block_out_channels=[4, 8],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
        up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"],
        latent_channels=4,
        norm_num_groups=2,
        sample_size=32,
    )
    scheduler = EulerDiscreteScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        steps_offset=1,
        beta_schedule="scaled_linear",
        timestep_spacing="leading",
    )
    text_encoder = CLIPTextModel(_text_config())
    text_encoder_2 = CLIPTextModelWithProjection(_text_config())
    scratch = folder.parent / (folder.name + "-vocab")
    parts = {"vae": vae, "text_encoder": text_encoder, "text_encoder_2": text_encoder_2, "unet": unet}
    parts |= {"tokenizer": _tokenizer(scratch), "tokenizer_2": _tokenizer(scratch), "scheduler": scheduler}
    if instruct:
        pipeline = StableDiffusionXLInstructPix2PixPipeline(**parts, add_watermarker=False)
    else:
        pipeline = StableDiffusionXLPipeline(**parts)
    pipeline.save_pretrained(folder)
    for name in ("tokenizer", "tokenizer_2"):
        (folder / name / "tokenizer.json").unlink(missing_ok=True)
        for file in ("vocab.json", "merges.txt"):
            shutil.copy(scratch / file, folder / name / file)
    shutil.rmtree(scratch)


def save_controlnet(folder: Path) -> None:
    from diffusers import ControlNetModel

    torch.manual_seed(1)
    ControlNetModel(
        block_out_channels=BLOCKS,
        layers_per_block=1,
        in_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        conditioning_embedding_out_channels=(4, 8),
        attention_head_dim=HEADS,
        use_linear_projection=True,
        addition_embed_type="text_time",
        addition_time_embed_dim=ADD_TIME_DIM,
        transformer_layers_per_block=(1, 1),
        projection_class_embeddings_input_dim=PROJECTION_INPUT,
        cross_attention_dim=2 * TEXT_HIDDEN,
        norm_num_groups=1,
    ).save_pretrained(folder)


def save_lora(folder: Path, seed: int = 3) -> Path:
    """A random peft LoRA on the UNet's attention, saved as diffusers saves one (``pytorch_lora_weights``)."""
    from diffusers import StableDiffusionXLPipeline
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    torch.manual_seed(2)
    unet = _unet()
    torch.manual_seed(seed)
    config = LoraConfig(r=4, lora_alpha=4, target_modules=["to_q", "to_k", "to_v", "to_out.0"], init_lora_weights=False)
    unet.add_adapter(config)
    StableDiffusionXLPipeline.save_lora_weights(folder, unet_lora_layers=get_peft_model_state_dict(unet))
    return folder / "pytorch_lora_weights.safetensors"


def save_ip_adapter(folder: Path) -> None:
    """A random IP-Adapter in h94/IP-Adapter's layout: the adapter's file under ``sdxl_models/`` (``image_proj.*``
    and ``ip_adapter.<n>.to_{k,v}_ip`` for each cross-attention, numbered 1, 3, 5... as the official files are) and a
    CLIP vision encoder under ``models/image_encoder``. The plain adapter's projection, not plus-face's resampler:
    the renderer's per-item embeddings do not depend on which."""
    from diffusers.models.attention_processor import IPAdapterAttnProcessor
    from diffusers.models.embeddings import ImageProjection
    from safetensors.torch import save_file
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(4)
    unet = _unet()
    tensors: dict[str, torch.Tensor] = {}
    key_id = 1
    for name in unet.attn_processors:
        if name.endswith("attn1.processor"):
            continue
        block = int(name.split(".")[1]) if not name.startswith("mid_block") else -1
        if name.startswith("mid_block"):
            hidden = BLOCKS[-1]
        elif name.startswith("up_blocks"):
            hidden = list(reversed(BLOCKS))[block]
        else:
            hidden = BLOCKS[block]
        weights = IPAdapterAttnProcessor(hidden_size=hidden, cross_attention_dim=2 * TEXT_HIDDEN).state_dict()
        tensors[f"ip_adapter.{key_id}.to_k_ip.weight"] = weights["to_k_ip.0.weight"]
        tensors[f"ip_adapter.{key_id}.to_v_ip.weight"] = weights["to_v_ip.0.weight"]
        key_id += 2
    projection = ImageProjection(  # 4 tokens: the number diffusers assumes for an official plain adapter
        cross_attention_dim=2 * TEXT_HIDDEN, image_embed_dim=TEXT_HIDDEN, num_image_text_embeds=4
    ).state_dict()
    tensors["image_proj.proj.weight"] = projection["image_embeds.weight"]
    tensors["image_proj.proj.bias"] = projection["image_embeds.bias"]
    tensors["image_proj.norm.weight"] = projection["norm.weight"]
    tensors["image_proj.norm.bias"] = projection["norm.bias"]
    (folder / ADAPTER_FILE).parent.mkdir(parents=True, exist_ok=True)
    save_file({key: value.contiguous() for key, value in tensors.items()}, folder / ADAPTER_FILE)
    vision = CLIPVisionConfig(
        hidden_size=TEXT_HIDDEN,
        projection_dim=TEXT_HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        image_size=32,
        patch_size=8,
    )
    CLIPVisionModelWithProjection(vision).save_pretrained(folder / "models" / "image_encoder")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def folder_entry(root: Path, folder: str, **fields) -> dict:
    """A manifest entry listing every file under ``root/folder`` with its size and sha256."""
    base = root / folder
    files = [
        {"path": path.relative_to(base).as_posix(), "sha256": _digest(path), "size_bytes": path.stat().st_size}
        for path in sorted(base.rglob("*"))
        if path.is_file()
    ]
    return {"file": folder, "files": files, "license": "Apache-2.0", "commercial_use": True, **fields}


def lora_entry(root: Path, path: Path, name: str) -> dict:
    return {
        "task": "lora",
        "architecture": "sdxl-lora",
        "file": path.relative_to(root).as_posix(),
        "sha256": _digest(path),
        "size_bytes": path.stat().st_size,
        "url": f"https://example.invalid/{name}/pytorch_lora_weights.safetensors",
        "license": "Apache-2.0",
        "commercial_use": True,
        "engine": "diffusers-sdxl",
        "group": "generative",
    }


def build_mirror(root: Path) -> Path:
    """Save every tiny part under ``root`` (the mirror: ``<mirror>/<file>``) and write the manifest that lists
    them; returns the manifest's path."""
    from tests.unit.render.tiny_flux2 import save_flux2_klein

    save_sdxl(root / "generative" / SDXL)
    save_sdxl(root / "generative" / INSTRUCT, instruct=True)
    save_controlnet(root / "generative" / CONTROLNET)
    lora = save_lora(root / "generative" / "loras")
    lora_b = save_lora(root / "generative" / "loras-b", seed=4)
    save_ip_adapter(root / "generative" / ADAPTER)
    save_flux2_klein(root / "generative" / FLUX2)
    common = {"engine": "diffusers-sdxl", "group": "generative"}
    models = {
        SDXL: folder_entry(
            root,
            f"generative/{SDXL}",
            task="image_generation",
            architecture="sdxl",
            url="https://example.invalid/sdxl-tiny/resolve/main",
            args={"side_px": 128},  # what a job renders at when the size is the model's (generated clothes)
            **common,
        ),
        INSTRUCT: folder_entry(
            root,
            f"generative/{INSTRUCT}",
            task="image_editing",
            architecture="sdxl-instructpix2pix",
            url="https://example.invalid/sdxl-instruct-tiny/resolve/main",
            args={"side_px": 64},
            **common,
        ),
        CONTROLNET: folder_entry(
            root,
            f"generative/{CONTROLNET}",
            task="controlnet",
            architecture="controlnet-sdxl",
            url="https://example.invalid/controlnet-tiny/resolve/main",
            args={"condition": "openpose"},
            **common,
        ),
        ADAPTER: folder_entry(
            root,
            f"generative/{ADAPTER}",
            task="ip_adapter",
            architecture="ip-adapter-sdxl",
            url="https://example.invalid/ip-adapter-tiny/resolve/main",
            args={
                "subfolder": "sdxl_models",
                "weight_name": ADAPTER_FILE.split("/")[-1],
                "image_encoder_folder": "models/image_encoder",
            },
            **common,
        ),
        **{name: lora_entry(root, path, name) for name, path in ((LORA, lora), (LORA_B, lora_b))},
        FLUX2: folder_entry(
            root,
            f"generative/{FLUX2}",
            task="image_editing",
            architecture="flux2-klein",
            url="https://example.invalid/flux2-klein-tiny/resolve/main",
            args={"side_px": 64, "dtype": "bfloat16"},  # as the shipped entry: its half precision
            engine="diffusers-flux2-klein",
            group="generative",
        ),
    }
    manifest = root / "models.yaml"
    manifest.write_text(yaml.safe_dump({"models": models}, sort_keys=False), encoding="utf-8")
    return manifest


# The shipped manifest's generative entries and the tiny part that stands in for each (its role, at its name).
SHIPPED_PARTS = {
    "sdxl-base-1.0": SDXL,
    "controlnet-openpose-sdxl": CONTROLNET,
    "controlnet-canny-sdxl": CONTROLNET,
    "ip-adapter-plus-face-sdxl": ADAPTER,
    "sdxl-instructpix2pix-768": INSTRUCT,
    "flux2-klein-4b": FLUX2,
}
LORAS = (LORA, LORA_B)  # none is shipped: the tiny ones join the shipped manifest under their own names


def as_shipped(root: Path, shipped_manifest: Path) -> Path:
    """The shipped manifest with its generative entries replaced by ``build_mirror(root)``'s tiny parts under the
    shipped names (a job asks for those), each ControlNet keeping its condition, and the ``LORAS``; written beside
    the parts."""
    tiny = yaml.safe_load((root / "models.yaml").read_text(encoding="utf-8"))["models"]
    manifest = yaml.safe_load(shipped_manifest.read_text(encoding="utf-8"))
    for name, part in SHIPPED_PARTS.items():
        entry = {**tiny[part], "engine": manifest["models"][name]["engine"]}
        if "condition" in manifest["models"][name].get("args", {}):  # the tiny part's own args otherwise (its size)
            entry["args"] = {"condition": manifest["models"][name]["args"]["condition"]}
        manifest["models"][name] = entry
    manifest["models"].update({name: tiny[name] for name in LORAS})
    path = root / "models-as-shipped.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path
