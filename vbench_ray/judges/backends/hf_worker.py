"""The ``hf`` judge's actor: one transformers model, loaded once, answering batches of requests.

What it does with media, generation and failures is described in ``backends/hf.py`` (the backend that starts
it, through a Ray Data actor pool or the run's engine replicas, ``backends/hf_engine.py``). Imports torch and
transformers only when an actor is made."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import os
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

log = logging.getLogger(__name__)

_VIDEO_CACHE = 16  # decoded videos kept per actor


class MediaError(ValueError):
    """An image or video part that cannot be turned into frames; the message names the URL."""


def _url_to_path(url: str) -> Path:
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise MediaError(f"file URL with a remote host is not supported: {url}")
        return Path(url2pathname(unquote(parsed.path)))
    if parsed.scheme == "" and os.path.isabs(url):
        return Path(url)
    raise MediaError(f"the hf backend reads file:// URLs, absolute paths and data: URLs, got {url[:120]!r}")


def _data_url_bytes(url: str) -> tuple[str, bytes]:
    header, _, payload = url.partition(",")
    if not header.endswith(";base64"):
        raise MediaError("data: URLs must be base64-encoded")
    try:
        return header[5:-7], base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise MediaError(f"invalid base64 in data: URL: {exc}") from exc


def _part_url(part: dict, key: str) -> str:
    value = part.get(key)
    if isinstance(value, dict):
        value = value.get("url")
    if not isinstance(value, str) or not value:
        raise MediaError(f"content part of type {part.get('type')!r} has no {key}.url")
    return value


def fit_pixels(image, max_pixels: int | None):
    """Downscale a PIL image (keeping its aspect ratio) so that width x height <= max_pixels."""
    from PIL import Image

    w, h = image.size
    if not max_pixels or w * h <= max_pixels:
        return image
    scale = math.sqrt(max_pixels / float(w * h))
    size = (max(1, int(w * scale)), max(1, int(h * scale)))
    return image.resize(size, Image.BICUBIC)


def _pick_dtype(name: str, device: str):
    import torch

    if name == "auto":
        return "auto"
    dtype = getattr(torch, name)
    if dtype == torch.float32:
        return dtype
    try:
        if device.startswith("cuda") and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
            raise RuntimeError("bf16 not supported on this GPU")
        a = torch.ones(4, 4, dtype=dtype, device=device)
        (a @ a).sum().item()
        torch.nn.functional.softmax(a, dim=-1)
        return dtype
    except Exception as exc:
        log.warning("dtype %s unusable on %s (%s): using float32", name, device, exc)
        return torch.float32


def _max_positions(config) -> int | None:
    for cfg in (getattr(config, "text_config", None), config):
        value = getattr(cfg, "max_position_embeddings", None) if cfg is not None else None
        if isinstance(value, int) and value > 0:
            return value
    return None


class HFJudgeWorker:
    """One transformers model in one Ray actor; called with batches of ``{request_id, messages}`` rows."""

    def __init__(self, cfg: dict):
        import torch
        from transformers import AutoProcessor

        self.cfg = cfg
        self.label = cfg.get("label") or Path(cfg["model_path"]).name
        device = str(cfg["hf"].get("device", "cpu"))
        if device.startswith("cuda"):
            # Ray gives each actor its own GPU (CUDA_VISIBLE_DEVICES): inside it, that GPU is cuda:0
            device = "cuda" if torch.cuda.is_available() else "cpu"
            if device == "cpu":
                log.warning(
                    "judge.hf.device=%s but no GPU is visible in the actor: running on CPU", cfg["hf"]["device"]
                )
        self.device = device
        self.dtype = _pick_dtype(str(cfg["hf"].get("dtype", "bfloat16")), device)
        path = cfg["model_path"]
        started = time.perf_counter()
        self.processor = AutoProcessor.from_pretrained(path)
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.multimodal = hasattr(self.processor, "image_processor")
        self.model = self._load_model(path).to(device).eval()
        if self.dtype == "auto":  # the checkpoint's own dtype: cast pixel inputs to it
            self.dtype = self.model.dtype
        self.tokenizer.padding_side = "left"
        if getattr(self.processor, "tokenizer", None) is not None:
            self.processor.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        gen = self.model.generation_config
        eos = gen.eos_token_id if gen.eos_token_id is not None else self.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        self.pad_id = gen.pad_token_id if gen.pad_token_id is not None else self.tokenizer.pad_token_id
        self.max_positions = _max_positions(self.model.config)
        self.videos: OrderedDict = OrderedDict()
        log.info(
            "hf judge %s loaded on %s (%s) in %.1f s", self.label, device, self.dtype, time.perf_counter() - started
        )

    def _load_model(self, path: str):
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

        config = AutoConfig.from_pretrained(path)
        kwargs = {"dtype": self.dtype}
        for auto in (AutoModelForImageTextToText, AutoModelForCausalLM):
            if type(config) in auto._model_mapping:
                return auto.from_pretrained(path, **kwargs)
        return AutoModelForImageTextToText.from_pretrained(path, **kwargs)  # raises naming the config class

    # ---------------------------------------------------------------------------------------------- media

    def _open_image(self, url: str, video: dict):
        from PIL import Image

        if url.startswith("data:"):
            import io

            _, data = _data_url_bytes(url)
            image = Image.open(io.BytesIO(data))
        else:
            path = _url_to_path(url)
            if not path.is_file():
                raise MediaError(f"image not found: {path}")
            image = Image.open(path)
        image.load()
        return fit_pixels(image.convert("RGB"), video.get("max_pixels"))

    def _video_frames(self, url: str, video: dict) -> list:
        if url.startswith("data:"):
            mime, data = _data_url_bytes(url)
            suffix = "." + (mime.split("/")[-1] if "/" in mime else "mp4")
            with tempfile.NamedTemporaryFile(suffix=suffix) as fh:
                fh.write(data)
                fh.flush()
                return self._decode(fh.name, video)
        path = _url_to_path(url)
        try:
            st = path.stat()
        except OSError:
            raise MediaError(f"video not found: {path}") from None
        key = (str(path), st.st_size, st.st_mtime_ns, json.dumps(video, sort_keys=True))
        if key in self.videos:
            self.videos.move_to_end(key)
            return self.videos[key]
        frames = self._decode(str(path), video)
        self.videos[key] = frames
        while len(self.videos) > _VIDEO_CACHE:
            self.videos.popitem(last=False)
        return frames

    def _decode(self, path: str, video: dict) -> list:
        from PIL import Image

        from vbench_ray.video.io import VideoReader, fps_indices

        reader = VideoReader(path)
        info = reader.info
        indices = fps_indices(info.num_frames, info.fps, float(video["fps"]), int(video["max_frames"]))
        return [fit_pixels(Image.fromarray(frame), video.get("max_pixels")) for frame in reader.read(indices)]

    def prepare(self, messages: list[dict], video: dict | None = None) -> tuple[str, list]:
        """The prompt text (the model's chat template) and the images, in order, of one request.

        ``video`` overrides ``judge.video`` for this request (``JudgeRequest.video``, e.g. an fps sweep)."""
        video = {**self.cfg["video"], **(video or {})}
        conversation, images = [], []
        for message in messages:
            content = message.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
            out = []
            for part in parts:
                kind = part.get("type")
                if kind == "text":
                    out.append({"type": "text", "text": str(part.get("text", ""))})
                elif kind in ("image_url", "image", "video_url", "video"):
                    if not self.multimodal:
                        raise MediaError(f"judge.model {self.label} takes no images, but the request has a {kind} part")
                    key = "video_url" if kind in ("video_url", "video") else "image_url"
                    url = _part_url(part, key if key in part else kind)
                    frames = self._video_frames(url, video) if key == "video_url" else [self._open_image(url, video)]
                    images.extend(frames)
                    out.extend({"type": "image"} for _ in frames)
                else:
                    raise MediaError(f"unsupported content part type {kind!r}")
            conversation.append({"role": message["role"], "content": out})
        text = self.processor.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
        return text, images

    # ---------------------------------------------------------------------------------------------- generation

    def _encode(self, texts: list[str], images: list):
        if self.multimodal:
            return self.processor(
                text=texts, images=images or None, padding=True, return_tensors="pt", add_special_tokens=False
            )
        return self.tokenizer(texts, padding=True, return_tensors="pt", add_special_tokens=False)

    def _generate(self, prepared: list[tuple[str, list]]) -> list[tuple[str, int, int]]:
        """Batched generate: (text, prompt tokens, completion tokens) per prepared request."""
        import torch

        enc = self._encode([p[0] for p in prepared], [im for p in prepared for im in p[1]])
        inputs = {}
        for key, value in enc.items():
            if isinstance(value, torch.Tensor):
                is_float = value.is_floating_point()
                value = value.to(self.device, dtype=self.dtype) if is_float else value.to(self.device)
            inputs[key] = value
        prompt_len = inputs["input_ids"].shape[1]
        max_new = int(self.cfg["max_tokens"])
        if self.max_positions:
            room = self.max_positions - prompt_len
            if room <= 0:
                raise ValueError(
                    f"prompt of {prompt_len} tokens does not fit the model's {self.max_positions} positions "
                    "(lower judge.video.max_frames or judge.video.max_pixels)"
                )
            max_new = min(max_new, room)
        temperature = float(self.cfg.get("temperature", 0.0))
        gen: dict[str, Any] = {"max_new_tokens": max_new, "do_sample": temperature > 0, "pad_token_id": self.pad_id}
        if temperature > 0:
            gen.update(temperature=temperature, top_p=float(self.cfg.get("top_p", 1.0)))
            if self.cfg.get("top_k") is not None:  # else the checkpoint's generation_config decides
                gen["top_k"] = int(self.cfg["top_k"])
        else:
            gen.update(temperature=None, top_p=None, top_k=None)
        torch.manual_seed(int(self.cfg.get("seed", 0)))
        with torch.inference_mode():
            out = self.model.generate(**inputs, **gen)
        new = out[:, prompt_len:].tolist()
        mask = inputs.get("attention_mask")
        results = []
        for i, tokens in enumerate(new):
            n = len(tokens)
            for j, tok in enumerate(tokens):
                if tok in self.eos_ids:
                    n = j + 1
                    break
            text = self.tokenizer.decode(tokens[:n], skip_special_tokens=True)
            prompt_tokens = int(mask[i].sum()) if mask is not None else prompt_len
            results.append((text, prompt_tokens, n))
        return results

    def __call__(self, batch):
        import pyarrow as pa

        responses: list[dict] = []
        ready: list[tuple[str, tuple[str, list], float]] = []
        for row in batch.to_pylist():
            rid = row["request_id"]
            started = time.perf_counter()
            try:
                override = json.loads(row.get("video") or "{}")
                ready.append((rid, self.prepare(json.loads(row["messages"]), override), time.perf_counter() - started))
            except Exception as exc:
                responses.append(self._error(rid, exc, time.perf_counter() - started))
        if ready:
            started = time.perf_counter()
            try:
                outs = self._generate([r[1] for r in ready])
                elapsed = time.perf_counter() - started
                for (rid, _, prep), (text, pt, ct) in zip(ready, outs):
                    responses.append(self._ok(rid, text, pt, ct, prep + elapsed))
            except Exception as exc:
                if len(ready) == 1:
                    rid, _, prep = ready[0]
                    responses.append(self._error(rid, exc, prep + time.perf_counter() - started))
                else:
                    log.warning("hf judge: batched generate failed (%s); generating one by one", exc)
                    for rid, prepared, prep in ready:  # isolate the request(s) that fail
                        one = time.perf_counter()
                        try:
                            ((text, pt, ct),) = self._generate([prepared])
                            responses.append(self._ok(rid, text, pt, ct, prep + time.perf_counter() - one))
                        except Exception as inner:
                            responses.append(self._error(rid, inner, prep + time.perf_counter() - one))
        return pa.Table.from_pylist(responses, schema=_response_schema())

    def _ok(self, rid, text, prompt_tokens, completion_tokens, latency) -> dict:
        return {
            "request_id": rid,
            "text": text,
            "error": None,
            "latency_s": float(latency),
            "prompt_tokens": int(prompt_tokens),
            "completion_tokens": int(completion_tokens),
            "model": self.label,
        }

    def _error(self, rid, exc, latency) -> dict:
        return {
            "request_id": rid,
            "text": None,
            "error": f"{type(exc).__name__}: {str(exc)[:1000]}",
            "latency_s": float(latency),
            "prompt_tokens": None,
            "completion_tokens": None,
            "model": self.label,
        }


def _response_schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("request_id", pa.string()),
            ("text", pa.string()),
            ("error", pa.string()),
            ("latency_s", pa.float64()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("model", pa.string()),
        ]
    )
