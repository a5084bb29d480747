"""SRC's score arithmetic (CoVEBench App. F, Table 2, "SAM2 + DINOv2, mask-based feature comparison for unchanged
areas"): the per-frame rule on paired frames and their entity masks (each frame cut to its mask's expanded box with
the rest zeroed, the cosine of the two crops' embeddings mapped to [0, 1], the mean over the scored frames) and the
choice of the top Grounding DINO detection, as functions of arrays and tensors: no model is loaded here. The rules
and their official sources are in ``vbench_ray/metrics/src.py``'s module docstring (steps 2 and 4).
"""

from __future__ import annotations

from typing import Callable

import numpy as np


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


def frame_pairs(
    source: np.ndarray,
    edited: np.ndarray,
    src_masks: np.ndarray,
    edit_masks: np.ndarray,
    min_pixels: int = 64,
    expand: float = 0.15,
) -> tuple[list, list, int]:
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
    details = {"frames": len(per_frame), "used_frames": len(used), "missing_in_edited": missing, "per_frame": per_frame}
    return (float(np.mean(used)) if used else float("nan")), details


def src_score(
    source: np.ndarray,
    edited: np.ndarray,
    src_masks: np.ndarray,
    edit_masks: np.ndarray,
    embed: Callable[[list[np.ndarray]], np.ndarray],
    min_pixels: int = 64,
    expand: float = 0.15,
) -> tuple[float, dict]:
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
