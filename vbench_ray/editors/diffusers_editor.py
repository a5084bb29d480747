"""``diffusers``: a video-to-video / VACE-style pipeline of the diffusers library, loaded from a local folder.

``editor.weights`` is a diffusers model folder (``model_index.json`` and one folder per component, as
``save_pretrained`` writes it, e.g. Wan2.1-VACE-14B-diffusers). It is loaded once per pool actor in ``setup``
with ``local_files_only=True`` (never a download), as ``editor.pipeline`` (a diffusers class name such as
``WanVACEPipeline``) or, when null, the class ``model_index.json`` names, in ``editor.dtype`` (bf16 | fp16 |
fp32; ``editor.vae_dtype`` for the VAE when it differs: Wan's examples keep it in fp32) on ``editor.device``.

Per case (CoVEBench § G.1): the pool has already resampled the source to the model's Table 7 frame rules
(editors/frames.py), so ``source`` holds exactly ``frames`` frames of ``height``×``width``; they are passed as
the pipeline's ``video`` (PIL frames, the input format of the diffusers Wan pipelines), the instruction as
``prompt``. A pipeline that takes a ``mask`` (VACE) gets an all-white one. In VACE (Jiang et al., ICCV 2025) a
task's input is a Video Condition Unit of frames ``F`` and masks ``M``, white (1) where the model generates and
black (0) where it keeps the frame, and its "concept decoupling" splits ``F`` into the reactive ``F·M`` and the
inactive ``F·(1-M)``; an instruction edit may change any pixel, so ``M`` is 1 everywhere (VACE's video-to-video
unit) and the whole source goes to the reactive stream, as context. Steps, guidance, negative prompt and
``editor.call_kwargs`` go to the call as well; only arguments the pipeline's ``__call__`` accepts are passed.
The output (float frames in [0, 1]) is written as an h264 mp4 at ``editor.fps`` (null: the input's fps, which
the frame rules scaled so the clip keeps its duration).

``editor.timeout_s`` is checked after each denoising step (``callback_on_step_end``: a model in this process cannot
be killed); a timeout or a CUDA out-of-memory fails that case alone (the allocator's cache is emptied for the next).

Determinism: the initial noise comes from a CPU ``torch.Generator`` seeded with ``editor.seed`` (the same seed
gives the same noise whatever the device), so the same seed gives the same video on the same hardware.
Cost (CoVEBench Table 5): the pool times each edit and reads ``torch.cuda.max_memory_allocated`` after
resetting it per case; the model runs in the actor's process, so that peak is the model's.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

from vbench_ray import cfgutil
from vbench_ray.editors.base import EditFailed, Editor, register_editor

log = logging.getLogger(__name__)

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_DEVICE = re.compile(r"cpu|cuda(:\d+)?")


def read_model_index(folder: str | Path) -> dict:
    """``model_index.json`` of a diffusers folder (a ``ValueError`` naming what is wrong)."""
    path = Path(folder) / "model_index.json"
    try:
        index = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(
            f"{folder} has no model_index.json (not a diffusers model folder: save_pretrained writes one)"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} cannot be read: {exc}") from None
    if not isinstance(index, dict) or "_class_name" not in index:
        raise ValueError(f"{path} does not name its pipeline class (`_class_name`)")
    if not isinstance(index["_class_name"], str) or not index["_class_name"]:
        raise ValueError(
            f"{path}: `_class_name` = {index['_class_name']!r}: expected the pipeline class's name "
            f"(a string such as \"WanVACEPipeline\")"
        )
    return index


def _diffusers_names() -> set[str] | None:
    """The names diffusers exports, or None without it. Read from the quoted names of its ``__init__.py`` (its
    lazy import table) rather than by importing it: that would import torch, seconds the preflight has not got."""
    import importlib.util

    spec = importlib.util.find_spec("diffusers")
    if spec is None or not spec.origin:
        return None
    try:
        return set(re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"', Path(spec.origin).read_text()))
    except OSError:
        return None


@register_editor
class DiffusersEditor(Editor):
    name = "diffusers"
    paper = "a local diffusers video-to-video / VACE pipeline (CoVEBench Table 5 cost, Table 7 frame rules)"
    needs = "weights (editor.weights: a diffusers model folder), GPU (editor.num_gpus)"
    weights_from = {
        "weights": "the model's diffusers folder on Hugging Face, e.g. Wan-AI/Wan2.1-VACE-14B-diffusers "
        "for VACE (configs/editors/vace.yaml)"
    }

    @classmethod
    def check_weights(cls, cfg: Any) -> list[str]:
        """Every problem of the config a load would hit, each naming its key (no model is loaded)."""
        out = []
        for key in ("dtype", "vae_dtype"):
            value = cfgutil.get(cfg, key)
            if value is not None and value not in DTYPES:
                out.append(f"`editor.{key}` = {value!r}: expected one of {list(DTYPES)}")
        device = cfgutil.get(cfg, "device")
        if device is not None and not _DEVICE.fullmatch(str(device)):
            out.append(
                f"`editor.device` = {device!r}: expected cpu, cuda or cuda:N (null: cuda when the actor has a GPU)"
            )
        steps = cfgutil.get(cfg, "steps")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
            out.append(f"`editor.steps` = {steps!r}: expected an integer >= 1 (null: the pipeline's default)")
        fps = cfgutil.get(cfg, "fps")
        if fps is not None and not (isinstance(fps, (int, float)) and fps > 0):
            out.append(f"`editor.fps` = {fps!r}: expected a number > 0 (null: the input's fps)")
        weights = cfgutil.get(cfg, "weights")
        if not weights:
            return out + [
                "`editor.weights` is not set: the diffusers editor loads a local diffusers model folder "
                "(model_index.json and one folder per component; nothing is downloaded)"
            ]
        folder = Path(str(weights)).expanduser()
        if not folder.is_dir():
            return out + [
                f"`editor.weights` = {str(weights)!r} is not a folder (a local diffusers model folder "
                f"with model_index.json; nothing is downloaded)"
            ]
        try:
            index = read_model_index(folder)
        except ValueError as exc:
            return out + [f"`editor.weights`: {exc}"]
        missing = [
            name
            for name, spec in index.items()
            if not name.startswith("_")
            and isinstance(spec, list)
            and spec[0] is not None
            and not (folder / name).is_dir()
        ]
        if missing:
            out.append(
                f"`editor.weights` = {str(weights)!r} lacks the component folder(s) {missing} that "
                f"model_index.json lists"
            )
        names = _diffusers_names()
        pipeline = cfgutil.get(cfg, "pipeline")
        if names is None:
            out.append("the diffusers editor needs the `diffusers` package (pip install diffusers)")
        elif pipeline and pipeline not in names:
            out.append(
                f"`editor.pipeline` = {pipeline!r} is not a diffusers class (e.g. WanVACEPipeline; null: "
                f"model_index.json's {index['_class_name']!r})"
            )
        elif not pipeline and index["_class_name"] not in names:
            out.append(
                f"`editor.weights`: model_index.json names {index['_class_name']!r}, which this diffusers "
                f"does not have; set `editor.pipeline` to the class to load it with"
            )
        return out

    # -- loading (once per actor)
    def setup(self) -> None:
        problems = self.check_weights(self.cfg)
        if problems:
            raise ValueError("; ".join(problems))
        self.use_pipeline(self.load_pipeline())

    def torch_dtypes(self):
        import torch

        main = getattr(torch, DTYPES[cfgutil.get(self.cfg, "dtype", "bf16")])
        vae = getattr(torch, DTYPES[cfgutil.get(self.cfg, "vae_dtype", cfgutil.get(self.cfg, "dtype", "bf16"))])
        return main, vae

    def load_pipeline(self):
        """The pipeline from ``editor.weights`` (``local_files_only``; the perf script overrides this)."""
        import diffusers
        import transformers

        diffusers.utils.logging.disable_progress_bar()  # one bar per component per actor is noise in the job's log
        transformers.utils.logging.disable_progress_bar()
        folder = str(Path(str(self.cfg.weights)).expanduser())
        cls_name = cfgutil.get(self.cfg, "pipeline") or read_model_index(folder)["_class_name"]
        pipeline_cls = getattr(diffusers, cls_name)
        main, vae = self.torch_dtypes()
        dtype = {"default": main, "vae": vae} if vae != main else main
        return pipeline_cls.from_pretrained(folder, dtype=dtype, local_files_only=True)

    def use_pipeline(self, pipe) -> None:
        """Place ``pipe`` on the device and note which call arguments it takes."""
        import torch

        device = cfgutil.get(self.cfg, "device") or ("cuda" if torch.cuda.is_available() else "cpu")
        if cfgutil.get(self.cfg, "offload", False):  # each component on the GPU only while it runs
            pipe.enable_model_cpu_offload(device=device)
        else:
            pipe.to(device)
        pipe.set_progress_bar_config(disable=True)
        self.pipe, self.device = pipe, device
        log.info(
            "diffusers editor: %s on %s (%s)",
            type(pipe).__name__,
            device,
            "offloaded" if cfgutil.get(self.cfg, "offload", False) else "resident",
        )
        params = inspect.signature(pipe.__call__).parameters
        self.accepts = set(params) if not any(p.kind == p.VAR_KEYWORD for p in params.values()) else None

    # -- one case
    def call_arguments(self, frames, instruction: str | None, height: int, width: int, seed: int) -> dict:
        """The pipeline call's keyword arguments for one case (those ``__call__`` accepts)."""
        import PIL.Image
        import torch

        n = len(frames)
        args = {
            "prompt": instruction or "",
            "negative_prompt": cfgutil.get(self.cfg, "negative_prompt"),
            "video": [PIL.Image.fromarray(f) for f in frames],
            "mask": [PIL.Image.new("L", (width, height), 255)] * n,  # white: every pixel may be edited
            "height": height,
            "width": width,
            "num_frames": n,
            "num_inference_steps": cfgutil.get(self.cfg, "steps"),
            "guidance_scale": cfgutil.get(self.cfg, "guidance"),
            "generator": torch.Generator(device="cpu").manual_seed(int(seed)),
            "output_type": "np",
            **dict(cfgutil.get(self.cfg, "call_kwargs", {}) or {}),
        }
        timeout = cfgutil.get(self.cfg, "timeout_s")
        if timeout:  # a model in this process cannot be killed: the pipeline's step callback stops it instead
            args["callback_on_step_end"] = _deadline(float(timeout))
        args = {k: v for k, v in args.items() if v is not None}
        return args if self.accepts is None else {k: v for k, v in args.items() if k in self.accepts}

    def edit(self, source: str, instruction: str | None, annotations: str | None, output: Path, **params) -> dict:
        import numpy as np
        import torch

        from vbench_ray.video.encode import write_video
        from vbench_ray.video.io import VideoReader

        reader = VideoReader(source)
        info = reader.info
        n = int(params.get("frames") or info.num_frames)
        frames = reader.read(range(min(n, info.num_frames)))
        height, width = int(params.get("height") or info.height), int(params.get("width") or info.width)
        seed = int(params.get("seed", cfgutil.get(self.cfg, "seed", 0)))
        torch.manual_seed(seed)  # for pipelines that draw from the global generator too
        try:
            with torch.inference_mode():
                result = self.pipe(**self.call_arguments(frames, instruction, height, width, seed))
        except torch.OutOfMemoryError as exc:  # this case fails; the cached blocks go, so the next case has room
            torch.cuda.empty_cache()
            raise EditFailed(f"CUDA out of memory: {str(exc).splitlines()[0][:300]}") from None
        video = result.frames if hasattr(result, "frames") else result[0]
        video = np.asarray(video[0] if len(np.shape(video)) == 5 else video, dtype=np.float32)
        frames_out = (np.clip(video, 0.0, 1.0) * 255.0).round().astype(np.uint8)
        write_video(output, frames_out, fps=float(cfgutil.get(self.cfg, "fps") or info.fps or 16.0))
        return {}


def _deadline(timeout: float):
    """A diffusers ``callback_on_step_end`` that fails the edit once ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout

    def callback(pipe, step, timestep, callback_kwargs):
        if time.monotonic() > deadline:
            raise EditFailed(f"timed out after {timeout:g} s (editor.timeout_s), at denoising step {step + 1}")
        return callback_kwargs

    return callback
