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

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from vbench_ray.metrics.base import (FrameMetric, Sampling, register_metric, require_weights,
                                     weights_problem)

WEIGHT_KEYS = {"grounding_dino": "Grounding DINO (a transformers GroundingDinoForObjectDetection directory)",
               "sam2": "SAM2 (a transformers Sam2Model directory)",
               "dinov2": "DINOv2 (a transformers Dinov2Model directory)"}
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
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
    text_threshold: float = 0.25  # Grounding DINO text-token threshold (official: 0.25)
    min_score: float = 0.25  # an entity is found if its best box scores at least this (official: 0.25)
    max_box_area: float = 0.55  # a box covering more of the frame is rejected (official: 0.55)
    min_mask_pixels: int = 64  # masks smaller than this count as empty (official: 64)
    bbox_expand: float = 0.15  # the crop box grows by this fraction of its size on each side (official: 0.15)
    entities_dir: Optional[str] = None  # official stage1 cache: {dir}/{task id}/metadata.json preserved_entities
    device: str = "cpu"  # cpu | cuda | cuda:N
    gpu_fraction: float = 0.34  # share of a GPU one SRC worker asks Ray for when device is CUDA
    bf16: bool = True  # SAM2 and Grounding DINO under bf16 autocast on CUDA (the official SAM2 runs so)
    batch_size: int = 16  # frames (SAM2) and crops (DINOv2) per forward pass


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
    ys, xs = np.nonzero(mask)
    if xs.size == 0:
        return None
    h, w = mask.shape
    x0, x1, y0, y1 = int(xs.min()), int(xs.max()) + 1, int(ys.min()), int(ys.max()) + 1
    dx, dy = int(round((x1 - x0) * expand)), int(round((y1 - y0) * expand))
    return max(0, x0 - dx), max(0, y0 - dy), min(w, x1 + dx), min(h, y1 + dy)


def masked_crop(frame: np.ndarray, mask: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """The frame cut to ``box`` with every pixel outside the mask set to 0."""
    x0, y0, x1, y1 = box
    crop = frame[y0:y1, x0:x1].copy()
    crop[~mask[y0:y1, x0:x1].astype(bool)] = 0
    return crop


def cosine_to_unit(cos: np.ndarray | float) -> np.ndarray | float:
    """Cosine similarity in [-1, 1] -> [0, 1]: ``clip((c + 1) / 2, 0, 1)``."""
    return np.clip((np.asarray(cos, dtype=np.float64) + 1.0) / 2.0, 0.0, 1.0)


def src_score(source: np.ndarray, edited: np.ndarray, src_masks: np.ndarray, edit_masks: np.ndarray,
              embed: Callable[[list[np.ndarray]], np.ndarray], min_pixels: int = 64,
              expand: float = 0.15) -> tuple[float, dict]:
    """SRC of paired frames and their preserved-entity masks (``(T, H, W)`` bool, one per frame).

    ``embed(crops) -> (N, D)`` L2-normalised embeddings. Returns ``(score, details)``; the score is nan when no
    frame has a source mask of at least ``min_pixels``."""
    per_frame: list[float | None] = []  # None: skipped; 0.0: entity gone; else filled from the cosine below
    missing = 0
    pairs: list[tuple[int, np.ndarray, np.ndarray]] = []
    for t in range(min(len(source), len(edited), len(src_masks), len(edit_masks))):
        if int(src_masks[t].sum()) < max(1, min_pixels):
            per_frame.append(None)
            continue
        if int(edit_masks[t].sum()) < max(1, min_pixels):
            per_frame.append(0.0)
            missing += 1
            continue
        a = masked_crop(source[t], src_masks[t], expanded_box(src_masks[t], expand))
        b = masked_crop(edited[t], edit_masks[t], expanded_box(edit_masks[t], expand))
        per_frame.append(float("nan"))
        pairs.append((t, a, b))
    if pairs:
        feats = np.asarray(embed([c for _, a, b in pairs for c in (a, b)]), dtype=np.float64)
        cos = (feats[0::2] * feats[1::2]).sum(axis=1)
        for (t, _, _), s in zip(pairs, cosine_to_unit(cos)):
            per_frame[t] = float(s)
    used = [s for s in per_frame if s is not None]
    details = {"frames": len(per_frame), "used_frames": len(used),
               "missing_in_edited": missing, "per_frame": per_frame}
    return (float(np.mean(used)) if used else float("nan")), details


# ----------------------------------------------------------------------------- metric

class SRCUndefined(ValueError):
    """The case has no SRC score (no entity to keep or found, or no source mask): a recorded failure."""


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
        self.gd_processor = AutoProcessor.from_pretrained(paths["grounding_dino"])
        self.gd_model = GroundingDinoForObjectDetection.from_pretrained(paths["grounding_dino"]).to(self.device).eval()
        self.sam = Sam2Model.from_pretrained(paths["sam2"]).to(self.device).eval()
        self.sam_size, self.sam_mean, self.sam_std = _sam_preprocessing(paths["sam2"], self.sam)
        self.dino_processor = AutoImageProcessor.from_pretrained(paths["dinov2"])
        self.dino = Dinov2Model.from_pretrained(paths["dinov2"]).to(self.device).eval()

    def _autocast(self):
        import contextlib

        if self.device.type == "cuda" and self.cfg.bf16:
            return self.torch.autocast("cuda", dtype=self.torch.bfloat16)
        return contextlib.nullcontext()

    def ground(self, frames: np.ndarray, entities: Sequence[str]) -> list[list[float]]:
        """The accepted box ``[x0, y0, x1, y1]`` (pixels) of each entity found on the probe frames."""
        from PIL import Image

        probes = [Image.fromarray(f) for f in frames[: max(1, int(self.cfg.probe_frames))]]
        h, w = frames.shape[1:3]
        boxes = []
        for entity in entities:
            prompt = entity.strip().lower().rstrip(".") + "."
            inputs = self.gd_processor(images=probes, text=[prompt] * len(probes), return_tensors="pt").to(self.device)
            with self.torch.inference_mode(), self._autocast():
                outputs = self.gd_model(**inputs)
            results = self.gd_processor.post_process_grounded_object_detection(
                outputs, inputs.input_ids, threshold=float(self.cfg.box_threshold),
                text_threshold=float(self.cfg.text_threshold), target_sizes=[(h, w)] * len(probes))
            best, best_box = 0.0, None
            for r in results:
                if len(r["scores"]):
                    i = int(r["scores"].argmax())
                    if float(r["scores"][i]) > best:
                        best, best_box = float(r["scores"][i]), [float(v) for v in r["boxes"][i].float().tolist()]
            if best_box is None or best < float(self.cfg.min_score):
                continue
            area = max(0.0, best_box[2] - best_box[0]) * max(0.0, best_box[3] - best_box[1]) / float(h * w)
            if area <= float(self.cfg.max_box_area):
                boxes.append(best_box)
        return boxes

    def segment(self, frames: np.ndarray, boxes: list[list[float]]) -> np.ndarray:
        """``(T, H, W)`` bool: per frame, the union of SAM2's masks for ``boxes``."""
        torch = self.torch
        import torch.nn.functional as F

        t, h, w = frames.shape[:3]
        out = np.zeros((t, h, w), dtype=bool)
        if not boxes:
            return out
        s = self.sam_size
        scale = torch.tensor([s / w, s / h, s / w, s / h], dtype=torch.float32)
        prompt = (torch.tensor(boxes, dtype=torch.float32) * scale).to(self.device)
        mean = torch.tensor(self.sam_mean, device=self.device).view(1, 3, 1, 1)
        std = torch.tensor(self.sam_std, device=self.device).view(1, 3, 1, 1)
        bs = max(1, int(self.cfg.batch_size))
        for start in range(0, t, bs):
            x = torch.from_numpy(frames[start:start + bs]).to(self.device).permute(0, 3, 1, 2).float() / 255.0
            x = (F.interpolate(x, size=(s, s), mode="bilinear", align_corners=False) - mean) / std
            with torch.inference_mode(), self._autocast():
                pred = self.sam(pixel_values=x, input_boxes=prompt.unsqueeze(0).expand(len(x), -1, -1),
                                multimask_output=False).pred_masks  # (B, boxes, 1, h', w')
            logits = F.interpolate(pred[:, :, 0].float(), size=(h, w), mode="bilinear", align_corners=False)
            out[start:start + len(x)] = (logits > 0).any(dim=1).cpu().numpy()
        return out

    def embed(self, crops: list[np.ndarray]) -> np.ndarray:
        """L2-normalised DINOv2 CLS embeddings ``(N, D)`` of the crops (official: ``/ (|f| + 1e-6)``)."""
        torch = self.torch
        feats = []
        bs = max(2, int(self.cfg.batch_size))
        for start in range(0, len(crops), bs):
            inputs = self.dino_processor(images=list(crops[start:start + bs]), return_tensors="pt").to(self.device)
            with torch.inference_mode():
                f = self.dino(**inputs).last_hidden_state[:, 0].float()
            feats.append((f / (f.norm(dim=1, keepdim=True) + 1e-6)).cpu().numpy())
        return np.concatenate(feats) if feats else np.zeros((0, 0))

    def compute(self, edited: np.ndarray, source: np.ndarray | None, entities: Sequence[str] | None = None) -> float:
        if source is None:
            raise ValueError("SRC compares against the source video, but no source frames were given")
        if not entities:
            raise SRCUndefined("SRC: the task names no concrete entity to keep (no Semantic Preservation question "
                               "about a localisable entity, no preserved_entities)")
        k = min(len(source), len(edited))
        if k == 0:
            raise ValueError("SRC needs at least one frame of each video")
        source, edited = source[:k], edited[:k]
        src_boxes = self.ground(source, entities)
        if not src_boxes:
            raise SRCUndefined(f"SRC: no entity to keep was found in the source at score >= {self.cfg.min_score} "
                               f"({list(entities)})")
        edit_boxes = self.ground(edited, entities)
        if not edit_boxes:
            raise SRCUndefined(f"SRC: no entity to keep was found in the edited video at score >= "
                               f"{self.cfg.min_score} ({list(entities)})")
        score, _ = src_score(source, edited, self.segment(source, src_boxes), self.segment(edited, edit_boxes),
                             self.embed, int(self.cfg.min_mask_pixels), float(self.cfg.bbox_expand))
        if np.isnan(score):
            raise SRCUndefined(f"SRC: no sampled source frame has a mask of >= {self.cfg.min_mask_pixels} pixels")
        return score


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
