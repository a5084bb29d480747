"""Static Region Consistency (SRC). CoVEBench App. F (Table 2, "SAM2 + DINOv2, mask-based feature comparison for
unchanged areas"); the details the paper leaves open follow the official evaluator (``metrics/vf/src``).

For one case, with the entities the task says must stay unchanged (see "Entities" below):

1. **Frames.** Both videos sampled at ``fps`` = 2 frames per second, at most ``max_frames`` = 32 (resampled
   uniformly beyond that); the first ``k = min(T_src, T_edit)`` samples of each are paired by index.
2. **Grounding** (Grounding DINO). Each entity, as a lower-case phrase ending in ``"."``, is detected on the
   first ``probe_frames`` = 3 sampled frames of a video (``box_threshold`` 0.30, ``text_threshold`` 0.25);
   the highest-scoring box over those frames is kept if its score is >= ``min_score`` (0.25) and it covers at
   most ``max_box_area`` (55 %) of the frame. Done separately on the source and on the edited video, as the
   official code does.
3. **Masks** (SAM2). The kept boxes prompt SAM2; per frame, the union of the entities' masks (logits > 0).
   The official code propagates the boxes through the video with SAM2's video predictor; here the same boxes
   prompt SAM2's image model on every sampled frame (batched across frames), which is the same for the static
   entities SRC is about and needs no per-video memory state. (transformers' ``Sam2Processor`` needs
   torchvision, which this stack lacks, so the module does SAM2's preprocessing itself: square resize to the
   model's input size, ImageNet mean/std, boxes scaled alike, mask logits resized back bilinearly.)
4. **Score** per frame pair ``t`` (official rule):
   - source mask below ``min_mask_pixels`` (64) pixels: the frame is skipped;
   - edited mask below it: the entity is gone, the frame scores 0;
   - else each frame is cropped to its own mask's bounding box expanded by ``bbox_expand`` (15 %) of its size
     on each side, pixels outside the mask set to 0, and embedded with DINOv2 (CLS token of the last hidden
     state, L2-normalised); the cosine ``c`` of the two embeddings maps to ``clip((c + 1) / 2, 0, 1)``.

   SRC is the mean over the scored frames. Scale [0, 1], higher is better.

Undefined cases are recorded failures (``error_SRC``), never a silent zero, as the official CSV's ``error``:
no entity to keep, no entity grounded in the source or in the edited video, or no frame with a source mask.

**How it runs** (the results of the processors and of one call per image, up to float rounding). Grounding
DINO, SAM2 and DINOv2 passes are shared across the cases of a pool call (``pool_batch``), ``batch_size`` images
a pass, each model's results read back once per call. With ``gpu_preprocess`` (default) Grounding DINO's and
DINOv2's image processing runs on the model's device: each distinct probe frame and each crop goes there once
as uint8, and is resized, centre-cropped and normalised there as the loaded processor does it (``image_plan``
reads its size rule, filter, crop, mean and std; torch's antialiased resize is what torchvision's processors
run; a processor it cannot reproduce runs itself); the Swin backbone then runs once per distinct probe frame
though each frame is prompted once per entity (``ImageEncoder.unique``). Masked crops are OpenCV's masked copy.
``bf16`` (default): SAM2 and Grounding DINO under bf16 autocast on CUDA, as the official SAM2 runs;
``bf16_encoders`` (off by default: not the official numerics) holds the two image encoders' weights in bf16 and
runs them without autocast's per-op casts.

**Entities.** The official pipeline asks an LLM (``--allow-llm``) to turn the task's *Semantic Preservation*
checklist questions into short noun phrases, dropping abstract targets (camera, framing, lighting, mood,
style, the background as a whole), or reads that result from its ``stage1_cache/{id}/metadata.json``
(``preserved_entities: [{"description": ...}]``). Here, in order:
``entities_dir`` set: that cache layout (the official cache works as is); else a task-level
``preserved_entities`` list in the checklist; else the phrases extracted by rule from the task's Semantic
Preservation questions (``entities_from_task``: the noun phrase that the question asks to be preserved,
``"... of the <phrase> preserved"``, abstract targets dropped). The decode stage hands them to ``compute``
through ``extra_inputs(row)`` (the row's ``annotations``: the task JSON).

**Exclusions** (paper App. F: camera moves, global style, heavy changes): CoVEBench's category mechanism,
``metrics.exclude.SRC`` defaults to Level-1 ``Camera`` and ``Style`` (the official category fast path);
``ids`` / ``ids_file`` give an explicit list (e.g. the tasks the official LLM filter skipped).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from vbench_ray.metrics.base import (FrameMetric, Sampling, register_metric, require_weights,
                                     weights_problem)
from vbench_ray.metrics.device_images import (IMAGENET_MEAN, IMAGENET_STD, device_preprocess, encoder_class,
                                              image_plan)

WEIGHT_KEYS = {"grounding_dino": "Grounding DINO (a transformers GroundingDinoForObjectDetection directory)",
               "sam2": "SAM2 (a transformers Sam2Model directory)",
               "dinov2": "DINOv2 (a transformers Dinov2Model directory)"}
# targets a mask cannot localise: dropped from the question-derived entities (official stage 1B drops them)
ABSTRACT_WORDS = ("camera", "framing", "frame", "shot", "angle", "perspective", "composition", "lighting", "light",
                  "mood", "atmosphere", "style", "tone", "colour grading", "color grading", "aesthetic",
                  "background", "scene", "environment", "bokeh", "motion", "movement")
_PRESERVED = re.compile(r"\bthe\s+([^?.,;]+?)\s+(?:is\s+|are\s+)?(?:preserved|maintained|retained|kept|unchanged)",
                        re.IGNORECASE)


@dataclass
class SRCConfig:
    grounding_dino: Optional[str] = None  # local Grounding DINO dir (official: IDEA-Research/grounding-dino-base)
    sam2: Optional[str] = None  # local SAM2 dir, transformers format (official: sam2_hiera_large)
    dinov2: Optional[str] = None  # local DINOv2 dir (official: facebook/dinov2-small)
    fps: float = 2.0  # frames sampled per second of video (official FRAME_FPS = 2)
    max_frames: int = 32  # at most this many sampled frames, resampled uniformly beyond (official: 32)
    probe_frames: int = 3  # Grounding DINO looks for each entity on the first this many frames (official: 3)
    box_threshold: float = 0.30  # Grounding DINO box confidence (official: 0.30)
    text_threshold: float = 0.25  # official 0.25: only names a box's words (labels), which SRC never reads
    min_score: float = 0.25  # an entity is found if its best box scores at least this (official: 0.25)
    max_box_area: float = 0.55  # a box covering more of the frame is rejected (official: 0.55)
    min_mask_pixels: int = 64  # masks smaller than this count as empty (official: 64)
    bbox_expand: float = 0.15  # the crop box grows by this fraction of its size on each side (official: 0.15)
    entities_dir: Optional[str] = None  # official stage1 cache: {dir}/{task id}/metadata.json preserved_entities
    device: str = "cpu"  # cpu | cuda | cuda:N
    gpu_fraction: float = 0.34  # share of a GPU one SRC worker asks Ray for when device is CUDA
    bf16: bool = True  # SAM2 and Grounding DINO under bf16 autocast on CUDA (the official SAM2 runs so)
    bf16_encoders: bool = False  # the image encoders (Grounding DINO's Swin, SAM2's Hiera) hold bf16 weights and run
    # in bf16 without autocast: no per-op casts, but LayerNorms and softmax in bf16 too (not the official numerics)
    gpu_preprocess: bool = True  # Grounding DINO's and DINOv2's resize / crop / normalise on the model's device, as
    # their processors do them (same size rule, interpolation, antialias, rounding); False: the processors, on the CPU
    batch_size: int = 16  # images per forward pass (Grounding DINO probes, SAM2 frames, DINOv2 crops), across cases
    pool_batch: int = 4  # cases one pool call scores together (each holds both videos' frames at native size)


# ----------------------------------------------------------------------------- entities

def _phrase(entity: Any) -> str:
    text = entity.get("description", "") if isinstance(entity, dict) else entity
    return str(text or "").strip().lower().rstrip(".").strip()


def _dedupe(phrases: Sequence[str]) -> list[str]:
    out: list[str] = []
    for p in phrases:
        if p and p not in out:
            out.append(p)
    return out


def is_abstract(phrase: str) -> bool:
    return any(re.search(rf"\b{re.escape(w)}\b", phrase) for w in ABSTRACT_WORDS)


def entity_from_question(question: str) -> str | None:
    """The noun phrase a Semantic Preservation question asks to be preserved, or None (abstract / no match).

    ``"How well is the identity and appearance of the young woman preserved?"`` -> ``"young woman"``."""
    m = _PRESERVED.search(question)
    if not m:
        return None
    phrase = m.group(1).lower()
    if " of the " in phrase:
        phrase = phrase.rsplit(" of the ", 1)[1]
    phrase = re.sub(r"^(?:the|a|an)\s+", "", phrase.strip())
    if not phrase or is_abstract(phrase) or len(phrase.split()) > 10:
        return None
    return phrase


def entities_from_task(task: dict) -> list[str]:
    """The entities to keep of one checklist task: its ``preserved_entities`` if it has them, else the phrases of
    its Semantic Preservation questions (``entity_from_question``)."""
    given = task.get("preserved_entities")
    if isinstance(given, list):
        return _dedupe([_phrase(e) for e in given])
    found = []
    for group in task.get("evaluation_groups") or []:
        for q in group.get("questions") or []:
            if q.get("dimension") == "Semantic Preservation":
                found.append(entity_from_question(str(q.get("question") or "")))
    return _dedupe([p for p in found if p])


def entities_from_cache(entities_dir: str | Path, case_id: Any) -> list[str]:
    """``preserved_entities`` of ``{entities_dir}/{case_id}/metadata.json`` (the official stage1 cache); [] when the
    file is absent or the task was skipped there."""
    path = Path(entities_dir) / str(case_id) / "metadata.json"
    if not path.exists():
        return []
    meta = json.loads(path.read_text(encoding="utf-8"))
    return _dedupe([_phrase(e) for e in meta.get("preserved_entities") or []])


# ----------------------------------------------------------------------------- score arithmetic

def expanded_box(mask: np.ndarray, expand: float) -> tuple[int, int, int, int] | None:
    """``(x0, y0, x1, y1)`` (end-exclusive) of the mask's bounding box grown by ``expand`` x its size per side,
    clipped to the frame; None for an empty mask."""
    ys, xs = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))  # rows and columns it touches
    if xs.size == 0:
        return None
    h, w = mask.shape
    x0, x1, y0, y1 = int(xs[0]), int(xs[-1]) + 1, int(ys[0]), int(ys[-1]) + 1
    dx, dy = int(round((x1 - x0) * expand)), int(round((y1 - y0) * expand))
    return max(0, x0 - dx), max(0, y0 - dy), min(w, x1 + dx), min(h, y1 + dy)


def masked_crop(frame: np.ndarray, mask: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """The frame cut to ``box`` with every pixel outside the mask set to 0 (``crop * mask[..., None].astype(bool)``;
    for uint8 frames done by OpenCV's masked copy into zeros, ~20x faster than numpy's broadcast multiply)."""
    x0, y0, x1, y1 = box
    crop, m = frame[y0:y1, x0:x1], mask[y0:y1, x0:x1]
    if crop.dtype == np.uint8 and crop.ndim == 3 and crop.size:
        import cv2

        m = m.view(np.uint8) if m.dtype == bool else (m != 0).view(np.uint8)  # a view: no copy of a bool mask
        try:
            return cv2.copyTo(crop, m, np.zeros(crop.shape, np.uint8))
        except cv2.error:  # a layout OpenCV does not take (e.g. negative strides): numpy below
            pass
    return crop * m[..., None].astype(bool)  # the pixel or 0


def cosine_to_unit(cos: np.ndarray | float) -> np.ndarray | float:
    """Cosine similarity in [-1, 1] -> [0, 1]: ``clip((c + 1) / 2, 0, 1)``."""
    return np.clip((np.asarray(cos, dtype=np.float64) + 1.0) / 2.0, 0.0, 1.0)


def frame_pairs(source: np.ndarray, edited: np.ndarray, src_masks: np.ndarray, edit_masks: np.ndarray,
                min_pixels: int = 64, expand: float = 0.15) -> tuple[list, list, int]:
    """The per-frame rule of SRC before any embedding: ``(per_frame, pairs, missing)``. ``per_frame[t]`` is None
    (skipped: no source mask), 0.0 (the entity is gone in the edit) or nan (to be filled from the cosine of
    ``pairs``' masked crops ``(t, source_crop, edited_crop)``); ``missing`` counts the 0.0 frames."""
    per_frame: list[float | None] = []
    missing = 0
    pairs: list[tuple[int, np.ndarray, np.ndarray]] = []
    for t in range(min(len(source), len(edited), len(src_masks), len(edit_masks))):
        if np.count_nonzero(src_masks[t]) < max(1, min_pixels):
            per_frame.append(None)
            continue
        if np.count_nonzero(edit_masks[t]) < max(1, min_pixels):
            per_frame.append(0.0)
            missing += 1
            continue
        a = masked_crop(source[t], src_masks[t], expanded_box(src_masks[t], expand))
        b = masked_crop(edited[t], edit_masks[t], expanded_box(edit_masks[t], expand))
        per_frame.append(float("nan"))
        pairs.append((t, a, b))
    return per_frame, pairs, missing


def pair_crops(pairs: list) -> list[np.ndarray]:
    """The crops to embed for ``pairs``, source then edited per pair (what ``score_pairs`` reads back)."""
    return [c for _, a, b in pairs for c in (a, b)]


def score_pairs(per_frame: list, pairs: list, feats: np.ndarray | None, missing: int) -> tuple[float, dict]:
    """SRC from ``frame_pairs``' output and the L2-normalised embeddings of ``pair_crops(pairs)``: each pair's
    cosine mapped to [0, 1], then the mean over the scored frames (nan when there is none)."""
    per_frame = list(per_frame)
    if pairs:
        feats = np.asarray(feats, dtype=np.float64)
        cos = (feats[0::2] * feats[1::2]).sum(axis=1)
        for (t, _, _), s in zip(pairs, cosine_to_unit(cos)):
            per_frame[t] = float(s)
    used = [s for s in per_frame if s is not None]
    details = {"frames": len(per_frame), "used_frames": len(used),
               "missing_in_edited": missing, "per_frame": per_frame}
    return (float(np.mean(used)) if used else float("nan")), details


def src_score(source: np.ndarray, edited: np.ndarray, src_masks: np.ndarray, edit_masks: np.ndarray,
              embed: Callable[[list[np.ndarray]], np.ndarray], min_pixels: int = 64,
              expand: float = 0.15) -> tuple[float, dict]:
    """SRC of paired frames and their preserved-entity masks (``(T, H, W)`` bool, one per frame).

    ``embed(crops) -> (N, D)`` L2-normalised embeddings. Returns ``(score, details)``; the score is nan when no
    frame has a source mask of at least ``min_pixels``."""
    per_frame, pairs, missing = frame_pairs(source, edited, src_masks, edit_masks, min_pixels, expand)
    feats = embed(pair_crops(pairs)) if pairs else None
    return score_pairs(per_frame, pairs, feats, missing)


def top_detections(logits, pred_boxes, hw: tuple[int, int], threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Per image, the highest-scoring Grounding DINO detection whose score passes ``threshold``: ``(scores (B,),
    boxes (B, 4))`` in pixels ``[x0, y0, x1, y1]``, score 0 where none passes.

    The same choice as the official loop (``post_process_grounded_object_detection`` keeps the boxes whose score,
    the maximum over text tokens of ``sigmoid(logits)``, is above ``threshold``; the official code takes the top
    one; ``text_threshold`` only names the box's words, which SRC never reads), computed for the whole batch on
    the device in one transfer instead of decoding a text label for each of the 900 queries."""
    scores, boxes = detections(logits, pred_boxes, hw, threshold)
    return scores.cpu().numpy(), boxes.cpu().numpy()


def detections(logits, pred_boxes, hw: tuple[int, int], threshold: float):
    """``top_detections`` as tensors on the model's device (read back later, with other passes')."""
    torch = __import__("torch")
    logits, pred_boxes = logits.detach(), pred_boxes.detach()
    probs = torch.sigmoid(logits.float())  # (B, queries, text tokens); padded text tokens have -inf logits
    scores = probs.max(dim=-1).values
    scores = torch.where(scores > threshold, scores, torch.zeros_like(scores))
    top = scores.argmax(dim=-1)  # the first maximum, as argmax over the kept boxes in query order
    cx, cy, w, h = pred_boxes.float()[torch.arange(len(top), device=top.device), top].unbind(-1)
    size = torch.tensor([hw[1], hw[0], hw[1], hw[0]], dtype=torch.float32, device=top.device)
    boxes = torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1) * size
    return scores.gather(1, top[:, None])[:, 0], boxes


# ----------------------------------------------------------------------------- metric

class SRCUndefined(ValueError):
    """The case has no SRC score (no entity to keep or found, or no source mask): a recorded failure."""


class _PhaseClock:
    """``clock(name)`` adds the wall time since the previous call (or since it was made) to the metric's
    ``phase_seconds[name]``."""

    def __init__(self, metric: Any):
        if not isinstance(getattr(metric, "phase_seconds", None), dict):
            metric.phase_seconds = defaultdict(float)
        self.seconds = metric.phase_seconds
        self.last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self.last
        self.last = now


@register_metric
class SRC(FrameMetric):
    """Static Region Consistency, CoVEBench App. F: DINOv2 cosine of preserved entities' masked crops (Grounding
    DINO + SAM2 masks), mapped to [0, 1]. See the module docstring for every rule and its source."""

    name = "SRC"
    config_class = SRCConfig
    needs_source = True
    scale = "[0,1]"
    model_backed = True

    def sampling(self) -> Sampling:
        return Sampling(n=None, fps=float(self.cfg.fps), max_frames=self.cfg.max_frames)

    def resources(self) -> dict:
        return {"num_gpus": float(self.cfg.gpu_fraction)} if str(self.cfg.device).startswith("cuda") else {}

    @classmethod
    def check_weights(cls, cfg: Any) -> list[str]:
        problems = []
        for key, what in WEIGHT_KEYS.items():
            problems += weights_problem(getattr(cfg, key, None), f"metrics.SRC.{key}", f"SRC needs {what}")
        entities_dir = getattr(cfg, "entities_dir", None)
        if entities_dir and not Path(entities_dir).is_dir():
            problems.append(f"SRC: config key `metrics.SRC.entities_dir` points to {entities_dir!r}, "
                            "which is not a directory")
        return problems

    def extra_inputs(self, row: dict) -> dict:
        """``{"entities": [...]}`` of the case (module docstring, "Entities"), from the row's task JSON."""
        if self.cfg.entities_dir:
            return {"entities": entities_from_cache(self.cfg.entities_dir, row.get("case_id"))}
        raw = row.get("annotations")
        task = json.loads(raw) if isinstance(raw, str) else (raw or {})
        return {"entities": entities_from_task(task) if isinstance(task, dict) else []}

    # -- models
    def setup(self) -> None:
        import torch
        from transformers import (AutoImageProcessor, AutoProcessor, Dinov2Model, GroundingDinoForObjectDetection,
                                  Sam2Model)

        paths = {k: require_weights(getattr(self.cfg, k), f"metrics.SRC.{k}", f"SRC needs {w}")
                 for k, w in WEIGHT_KEYS.items()}
        self.torch = torch
        self.device = torch.device(self.cfg.device)
        encoder = encoder_class()
        bf16 = bool(self.cfg.bf16_encoders)
        self.gd_processor = AutoProcessor.from_pretrained(paths["grounding_dino"])
        self.gd_model = GroundingDinoForObjectDetection.from_pretrained(paths["grounding_dino"]).to(self.device).eval()
        conv = self.gd_model.model.backbone.conv_encoder
        conv.model = self.gd_backbone = encoder(conv.model, bf16=bf16)  # one Swin pass per distinct probe frame
        self.sam = Sam2Model.from_pretrained(paths["sam2"]).to(self.device).eval()
        if bf16:
            self.sam.vision_encoder = encoder(self.sam.vision_encoder, bf16=True)
        self.sam_size, self.sam_mean, self.sam_std = _sam_preprocessing(paths["sam2"], self.sam)
        self.dino_processor = AutoImageProcessor.from_pretrained(paths["dinov2"])
        self.dino = Dinov2Model.from_pretrained(paths["dinov2"]).to(self.device).eval()
        on_device = bool(self.cfg.gpu_preprocess)
        self.gd_plan = image_plan(self.gd_processor) if on_device else None
        self.dino_plan = image_plan(self.dino_processor) if on_device else None

    def _autocast(self):
        if self.device.type == "cuda" and self.cfg.bf16:
            return self.torch.autocast("cuda", dtype=self.torch.bfloat16)
        return contextlib.nullcontext()

    def _upload(self, arrays: Sequence[np.ndarray]) -> list:
        """uint8 arrays -> tensors of the same shapes on the model's device, in one host-to-device copy (from pinned
        memory on CUDA)."""
        torch = self.torch
        sizes = [int(a.size) for a in arrays]
        host = torch.empty(sum(sizes), dtype=torch.uint8, pin_memory=self.device.type == "cuda")
        flat, at = host.numpy(), 0
        for a, n in zip(arrays, sizes):
            flat[at:at + n].reshape(a.shape)[...] = a
            at += n
        dev = host.to(self.device, non_blocking=True)
        out, at = [], 0
        for a, n in zip(arrays, sizes):
            out.append(dev[at:at + n].view(a.shape))
            at += n
        return out

    def ground(self, frames: np.ndarray, entities: Sequence[str]) -> list[list[float]]:
        """The accepted box ``[x0, y0, x1, y1]`` (pixels) of each entity found on the probe frames."""
        return self.ground_many([(frames, entities)])[0]

    def ground_many(self, jobs: Sequence[tuple[np.ndarray, Sequence[str]]]) -> list[list[list[float]]]:
        """``ground`` of several videos (``(frames, entities)`` each, e.g. of several cases) in shared Grounding
        DINO passes: every (video, entity) is one prompt on the video's probe frames; prompts on frames of one
        size go through the model together, at most ``batch_size`` images per pass, a video's prompts in one pass
        where they fit (so that its frames are preprocessed and go through the backbone once: ``_ground_pass``);
        frames of different sizes would be padded, which would change the detections, so they never share a pass;
        prompts of different lengths are padded, which the text encoder masks out."""
        units, by_size = [], {}  # a unit: (job, entity, probe frames, (h, w)); units grouped by frame size
        for j, (frames, entities) in enumerate(jobs):
            probes = frames[: max(1, int(self.cfg.probe_frames))]
            for entity in entities:
                hw = tuple(frames.shape[1:3])
                by_size.setdefault(hw, []).append(len(units))
                units.append((j, entity.strip().lower().rstrip(".") + ".", probes, hw))
        cap = max(1, int(self.cfg.batch_size))
        order, found = [], []  # units in pass order; per pass, the top detection of each (prompt, probe) image
        for hw, members in by_size.items():
            for chunk in _pack(members, [len(units[u][2]) for u in members], [units[u][0] for u in members], cap):
                found.append(self._ground_pass([units[u] for u in chunk], hw))
                order += chunk
        best: list[tuple[float, list[float] | None]] = [(0.0, None)] * len(units)
        if found:  # one read-back for all passes: the device runs them back to back
            scores = self.torch.cat([f[0] for f in found]).float().cpu().numpy()
            pixels = self.torch.cat([f[1] for f in found]).float().cpu().numpy()
            at = 0
            for u in order:
                top, top_box = 0.0, None
                for score, box in zip(scores[at:at + len(units[u][2])], pixels[at:at + len(units[u][2])]):
                    if score > top:  # the first probe wins a tie, as the official loop over probes
                        top, top_box = float(score), [float(v) for v in box]
                best[u] = (top, top_box)
                at += len(units[u][2])
        boxes: list[list[list[float]]] = [[] for _ in jobs]
        for (j, _, _, (h, w)), (score, box) in zip(units, best):
            if box is None or score < float(self.cfg.min_score):
                continue
            area = max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1]) / float(h * w)
            if area <= float(self.cfg.max_box_area):
                boxes[j].append(box)
        return boxes

    def _ground_pass(self, units: list, hw: tuple[int, int]):
        """One Grounding DINO pass over ``units``' probe images: the top detection (``detections``: score, box in
        pixels) of each (prompt, probe) image, units in order, as tensors on the device.

        With ``gpu_preprocess`` (and a processor ``image_plan`` reproduces), each distinct probe frame of the pass
        goes to the device once as uint8 and is resized and normalised there (``device_preprocess``), and the Swin
        backbone runs once per distinct frame (``ImageEncoder.unique``); the text goes through the processor's own
        tokenisation. Otherwise the processor prepares every (frame, prompt) image on the CPU."""
        texts = [prompt for _, prompt, probes, _ in units for _ in probes]
        if self.gd_plan is None:
            from PIL import Image

            images = [Image.fromarray(f) for _, _, probes, _ in units for f in probes]
            inputs = self.gd_processor(images=images, text=texts, padding="longest",
                                       return_tensors="pt").to(self.device)
            sharing = contextlib.nullcontext()
        else:
            videos = list(dict.fromkeys(j for j, _, _, _ in units))  # the pass's videos, each with its probe frames
            probes = {j: p for j, _, p, _ in units}
            slot = dict(zip(videos, np.cumsum([0] + [len(probes[j]) for j in videos[:-1]]).tolist()))
            index = [slot[j] + i for j, _, p, _ in units for i in range(len(p))]  # image of each (prompt, probe)
            pixels = device_preprocess(self.torch.cat(self._upload([probes[j] for j in videos])), self.gd_plan)
            first = self.torch.tensor([index.index(u) for u in range(len(pixels))], device=self.device)
            inverse = self.torch.tensor(index, device=self.device)
            inputs = self.gd_processor(text=texts, padding="longest", return_tensors="pt").to(self.device)
            inputs["pixel_values"] = pixels.index_select(0, inverse)
            inputs["pixel_mask"] = self.torch.ones((len(index), *pixels.shape[-2:]), dtype=self.torch.long,
                                                   device=self.device)  # the processor's: no padding in a pass
            sharing = self.gd_backbone.unique(first, inverse)  # backbone row u: pixels[u]; prompt row i: index[i]
        with self.torch.inference_mode(), self._autocast(), sharing:
            outputs = self.gd_model(**inputs)
            return detections(outputs.logits, outputs.pred_boxes, hw, float(self.cfg.box_threshold))

    def segment(self, frames: np.ndarray, boxes: list[list[float]]) -> np.ndarray:
        """``(T, H, W)`` bool: per frame, the union of SAM2's masks for ``boxes``."""
        return self.segment_many([(frames, boxes)])[0]

    def segment_many(self, jobs: Sequence[tuple[np.ndarray, list[list[float]]]]) -> list[np.ndarray]:
        """``segment`` of several videos (``(frames, boxes)`` each): SAM2's image encoder runs on the frames of all
        of them, ``batch_size`` frames per pass (each frame is resized to SAM2's square input on its own; a pass's
        frames go to the device in one uint8 copy), and the mask decoder then prompts each video's frames with that
        video's boxes; the masks come back to the host once per pass."""
        torch = self.torch
        import torch.nn.functional as F

        out = [np.zeros(frames.shape[:3], dtype=bool) for frames, _ in jobs]
        flat = [(j, t) for j, (frames, boxes) in enumerate(jobs) if boxes for t in range(len(frames))]
        if not flat:
            return out
        s = self.sam_size
        mean = torch.tensor(self.sam_mean, device=self.device).view(1, 3, 1, 1)
        std = torch.tensor(self.sam_std, device=self.device).view(1, 3, 1, 1)
        prompts = {}
        for j, (frames, boxes) in enumerate(jobs):
            if boxes:
                h, w = frames.shape[1:3]
                scale = torch.tensor([s / w, s / h, s / w, s / h], dtype=torch.float32)
                prompts[j] = (torch.tensor(boxes, dtype=torch.float32) * scale).to(self.device)
        bs = max(1, int(self.cfg.batch_size))
        masks, where = [], []  # per run of a pass: its masks on the device, and (job, first frame, frames)
        for start in range(0, len(flat), bs):
            chunk = flat[start:start + bs]
            runs = _runs([j for j, _ in chunk])  # (job, first, end) of the chunk's consecutive frames per video
            frames = self._upload([jobs[j][0][chunk[a][1]:chunk[b - 1][1] + 1] for j, a, b in runs])
            x = torch.cat([self._sam_input(f, s) for f in frames])
            x = (x - mean) / std
            with torch.inference_mode(), self._autocast():
                embeddings = self.sam.get_image_embeddings(x)
                for j, a, b in runs:
                    pred = self.sam(image_embeddings=[e[a:b] for e in embeddings],
                                    input_boxes=prompts[j].unsqueeze(0).expand(b - a, -1, -1),
                                    multimask_output=False).pred_masks  # (frames, boxes, 1, h', w')
                    h, w = jobs[j][0].shape[1:3]
                    logits = F.interpolate(pred[:, :, 0].float(), size=(h, w), mode="bilinear", align_corners=False)
                    masks.append((logits > 0).any(dim=1).flatten())
                    where.append((j, chunk[a][1], b - a))
        host = torch.cat(masks).cpu().numpy()  # one read-back: the next pass's upload overlapped this one's work
        at = 0
        for j, first, n in where:
            h, w = jobs[j][0].shape[1:3]
            out[j][first:first + n] = host[at:at + n * h * w].reshape(n, h, w)
            at += n * h * w
        return out

    def _sam_input(self, frames, size: int):
        """uint8 ``(N, H, W, 3)`` (an array, or a tensor on any device) -> float ``(N, 3, size, size)`` in [0, 1] on
        the model's device (bilinear)."""
        import torch.nn.functional as F

        x = frames if isinstance(frames, self.torch.Tensor) else self.torch.from_numpy(np.ascontiguousarray(frames))
        x = x.to(self.device).permute(0, 3, 1, 2).float() / 255.0
        return F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)

    def embed(self, crops: list[np.ndarray]) -> np.ndarray:
        """L2-normalised DINOv2 CLS embeddings ``(N, D)`` of the crops (official: ``/ (|f| + 1e-6)``). With
        ``gpu_preprocess`` the crops go to the device in one uint8 copy and are resized, centre-cropped and
        normalised there as DINOv2's processor does (``device_preprocess``); else the processor runs on the CPU."""
        torch = self.torch
        feats = []
        bs = max(2, int(self.cfg.batch_size))
        for start in range(0, len(crops), bs):
            part = list(crops[start:start + bs])
            if self.dino_plan is None:
                inputs = self.dino_processor(images=part, return_tensors="pt").to(self.device)
            else:
                inputs = {"pixel_values": torch.cat([device_preprocess(c[None], self.dino_plan)
                                                     for c in self._upload(part)])}
            with torch.inference_mode():
                f = self.dino(**inputs).last_hidden_state[:, 0].float()
                feats.append(f / (f.norm(dim=1, keepdim=True) + 1e-6))
        return torch.cat(feats).cpu().numpy() if feats else np.zeros((0, 0))  # one read-back

    def compute(self, edited: np.ndarray, source: np.ndarray | None, entities: Sequence[str] | None = None) -> float:
        result = self.compute_many([(edited, source, {"entities": entities})])[0]
        if isinstance(result, Exception):
            raise result
        return result

    def compute_many(self, items) -> list[float | Exception]:
        """SRC of several cases with shared model passes (Grounding DINO on the sources, then on the edits that
        still have an entity, SAM2 on every kept video, DINOv2 on every masked crop), each case scored by the
        module docstring's rules; a case that is undefined (``SRCUndefined``) or malformed is its own failure.
        The wall time of each phase adds up in ``phase_seconds`` (``ground``, ``segment``, ``pairs``, ``embed``;
        each phase ends by reading its results back to the host, so no extra synchronisation), the cases in
        ``phase_cases``."""
        clock = _PhaseClock(self)
        results: list[float | Exception] = [float("nan")] * len(items)
        live: dict[int, tuple[np.ndarray, np.ndarray, list[str]]] = {}
        for k, (edited, source, kwargs) in enumerate(items):
            try:
                live[k] = self._case(edited, source, (kwargs or {}).get("entities"))
            except Exception as exc:
                results[k] = exc
        boxes: dict[str, dict[int, list]] = {}
        for which, pos in (("source", 0), ("edited video", 1)):  # the edit is grounded only if the source was
            found = self.ground_many([(case[pos], case[2]) for case in live.values()])
            boxes[which] = dict(zip(live, found))
            for k in [k for k in live if not boxes[which][k]]:
                results[k] = SRCUndefined(f"SRC: no entity to keep was found in the {which} at score >= "
                                          f"{self.cfg.min_score} ({list(live[k][2])})")
                del live[k]
        clock("ground")
        masks = self.segment_many([job for k, (src, edit, _) in live.items()
                                   for job in ((src, boxes["source"][k]), (edit, boxes["edited video"][k]))])
        clock("segment")
        prepared, crops = {}, []
        for n, (k, (src, edit, _)) in enumerate(live.items()):
            per_frame, pairs, missing = frame_pairs(src, edit, masks[2 * n], masks[2 * n + 1],
                                                    int(self.cfg.min_mask_pixels), float(self.cfg.bbox_expand))
            prepared[k] = (per_frame, pairs, missing, len(crops))
            crops += pair_crops(pairs)
        clock("pairs")
        feats = self.embed(crops) if crops else None
        clock("embed")
        for k, (per_frame, pairs, missing, at) in prepared.items():
            score, _ = score_pairs(per_frame, pairs, feats[at:at + 2 * len(pairs)] if pairs else None, missing)
            results[k] = score if not np.isnan(score) else SRCUndefined(
                f"SRC: no sampled source frame has a mask of >= {self.cfg.min_mask_pixels} pixels")
        self.phase_cases = getattr(self, "phase_cases", 0) + len(items)
        return results

    @staticmethod
    def _case(edited, source, entities) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """A case's ``(source, edited, entities)`` with the first ``min(T_src, T_edit)`` frames of each, or the
        reason it has no SRC."""
        if source is None:
            raise ValueError("SRC compares against the source video, but no source frames were given")
        if not entities:
            raise SRCUndefined("SRC: the task names no concrete entity to keep (no Semantic Preservation question "
                               "about a localisable entity, no preserved_entities)")
        k = min(len(source), len(edited))
        if k == 0:
            raise ValueError("SRC needs at least one frame of each video")
        return source[:k], edited[:k], list(entities)


def _runs(keys: list[int]) -> list[tuple[int, int, int]]:
    """``(key, start, end)`` of each run of equal consecutive ``keys``."""
    runs: list[tuple[int, int, int]] = []
    for i, key in enumerate(keys):
        if runs and runs[-1][0] == key:
            runs[-1] = (key, runs[-1][1], i + 1)
        else:
            runs.append((key, i, i + 1))
    return runs


def _pack(items: list, sizes: list[int], keys: list, cap: int) -> list[list]:
    """``items`` in order, in chunks of at most ``cap`` total size (an item larger than ``cap`` alone); a run of
    consecutive items with one key (one video's prompts) starts a new chunk rather than being split, if it fits."""
    chunks: list[list] = []
    chunk: list = []
    used = 0
    for _, a, b in _runs(keys):
        if chunk and used + sum(sizes[a:b]) > cap:
            chunks.append(chunk)
            chunk, used = [], 0
        for i in range(a, b):
            if chunk and used + sizes[i] > cap:
                chunks.append(chunk)
                chunk, used = [], 0
            chunk.append(items[i])
            used += sizes[i]
    if chunk:
        chunks.append(chunk)
    return chunks


# ----------------------------------------------------------------------------- random models (tests, perf)

_WORDS = [".", "red", "blue", "green", "square", "circle", "cube", "triangle", "the", "of", "a", "small", "large",
          "person", "woman", "man", "dog", "car", "tree", "cup", "on", "left", "right"]
# the published models' sizes, and toy ones (tests: ~1 M parameters, a few seconds to build)
RANDOM_SIZES = {
    "real": dict(  # grounding-dino-base, sam2-hiera-large, dinov2-small
        bert=dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                  max_position_embeddings=512, vocab_size=30522),
        swin=dict(image_size=384, patch_size=4, embed_dim=128, depths=[2, 2, 18, 2], num_heads=[4, 8, 16, 32],
                  window_size=12),
        gdino=dict(d_model=256, encoder_layers=6, decoder_layers=6, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                   encoder_attention_heads=8, decoder_attention_heads=8, num_queries=900, num_feature_levels=4,
                   encoder_n_points=4, decoder_n_points=4, max_text_len=256),
        gdino_size={"shortest_edge": 800, "longest_edge": 1333},
        hiera=dict(hidden_size=144, num_attention_heads=2, blocks_per_stage=[2, 6, 36, 4],
                   embed_dim_per_stage=[144, 288, 576, 1152], num_attention_heads_per_stage=[2, 4, 8, 16],
                   global_attention_blocks=[23, 33, 43], window_size_per_stage=[8, 4, 16, 8],
                   window_positional_embedding_background_size=[7, 7], image_size=[1024, 1024]),
        sam_vision=dict(backbone_channel_list=[1152, 576, 288, 144],
                        backbone_feature_sizes=[[256, 256], [128, 128], [64, 64]], fpn_hidden_size=256),
        sam_prompt=dict(hidden_size=256, image_size=1024, patch_size=16),
        sam_decoder=dict(hidden_size=256, mlp_dim=2048, num_attention_heads=8, iou_head_hidden_dim=256),
        dino=dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536,
                  image_size=518, patch_size=14),
        dino_size=({"shortest_edge": 256}, {"height": 224, "width": 224})),
    "tiny": dict(
        bert=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                  max_position_embeddings=64, vocab_size=None),
        swin=dict(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2],
                  window_size=4),
        gdino=dict(d_model=32, encoder_layers=1, decoder_layers=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                   encoder_attention_heads=2, decoder_attention_heads=2, num_queries=10, num_feature_levels=4,
                   encoder_n_points=2, decoder_n_points=2, max_text_len=32),
        gdino_size={"shortest_edge": 64, "longest_edge": 96},
        hiera=dict(hidden_size=16, num_attention_heads=1, blocks_per_stage=[1, 1, 2, 1],
                   embed_dim_per_stage=[16, 32, 64, 128], num_attention_heads_per_stage=[1, 1, 1, 1],
                   global_attention_blocks=[3], window_size_per_stage=[4, 4, 4, 4],
                   window_positional_embedding_background_size=[4, 4], image_size=[64, 64]),
        sam_vision=dict(backbone_channel_list=[128, 64, 32, 16], backbone_feature_sizes=[[16, 16], [8, 8], [4, 4]],
                        fpn_hidden_size=32),
        sam_prompt=dict(hidden_size=32, image_size=64, patch_size=16),
        sam_decoder=dict(hidden_size=32, mlp_dim=64, num_attention_heads=2, iou_head_hidden_dim=32),
        dino=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, image_size=28,
                  patch_size=14),
        dino_size=({"shortest_edge": 28}, {"height": 28, "width": 28})),
}


def save_random_src(out: str | Path, size: str = "tiny", seed: int = 0) -> dict[str, str]:
    """Random-initialised Grounding DINO, SAM2 and DINOv2 in transformers format, with their processors, built
    offline (``size``: ``tiny`` for tests, ``real`` for the published sizes in tests/perf). Their outputs mean
    nothing. Returns the ``metrics.SRC`` weight keys -> directories."""
    import torch
    import transformers as t

    spec = RANDOM_SIZES[size]
    torch.manual_seed(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # a WordPiece vocabulary laid out like BERT's (the special tokens at their usual ids when it is full size)
    n_vocab = spec["bert"]["vocab_size"] or (len(_WORDS) + 5)
    if n_vocab > 104:
        vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _WORDS
    else:
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _WORDS
    vocab += [f"w{i}" for i in range(n_vocab - len(vocab))]
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = t.BertTokenizerFast(vocab_file=str(out / "vocab.txt"), do_lower_case=True)
    text = t.BertConfig(**{**spec["bert"], "vocab_size": len(vocab)})
    swin = t.SwinConfig(**spec["swin"], out_features=["stage2", "stage3", "stage4"])
    t.GroundingDinoForObjectDetection(t.GroundingDinoConfig(backbone_config=swin, text_config=text, **spec["gdino"])
                                      ).save_pretrained(out / "gdino")
    gd_images = getattr(t, "GroundingDinoImageProcessorPil", None) or t.GroundingDinoImageProcessor
    t.GroundingDinoProcessor(image_processor=gd_images(size=spec["gdino_size"]), tokenizer=tok
                             ).save_pretrained(out / "gdino")
    sam = t.Sam2Model(t.Sam2Config(
        vision_config=t.Sam2VisionConfig(backbone_config=t.Sam2HieraDetConfig(**spec["hiera"]), **spec["sam_vision"]),
        prompt_encoder_config=t.Sam2PromptEncoderConfig(**spec["sam_prompt"]),
        mask_decoder_config=t.Sam2MaskDecoderConfig(**spec["sam_decoder"])))
    sam.save_pretrained(out / "sam2")
    t.Dinov2Model(t.Dinov2Config(**spec["dino"])).save_pretrained(out / "dinov2")
    resize, crop = spec["dino_size"]
    bit = getattr(t, "BitImageProcessorPil", None) or t.BitImageProcessor
    bit(size=resize, crop_size=crop, do_center_crop=True, image_mean=list(IMAGENET_MEAN), image_std=list(IMAGENET_STD)
        ).save_pretrained(out / "dinov2")
    return {"grounding_dino": str(out / "gdino"), "sam2": str(out / "sam2"), "dinov2": str(out / "dinov2")}


def _sam_preprocessing(path: Path, model: Any) -> tuple[int, tuple, tuple]:
    """SAM2's input size and normalisation: from ``preprocessor_config.json`` when there is one, else the model's
    configured image size and ImageNet mean/std (SAM2's own)."""
    size = int(model.config.prompt_encoder_config.image_size)
    mean, std = IMAGENET_MEAN, IMAGENET_STD
    pre = Path(path) / "preprocessor_config.json"
    if pre.exists():
        cfg = json.loads(pre.read_text(encoding="utf-8"))
        size = int((cfg.get("size") or {}).get("height", size))
        mean, std = tuple(cfg.get("image_mean") or mean), tuple(cfg.get("image_std") or std)
    return size, mean, std
