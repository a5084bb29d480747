"""Reading, probing and writing the media of agentic tasks: h264 video with an AAC audio track, via PyAV.

AgenticVBench deliverables are real files (``fixed.mp4``, ``final.mp4`` ...) whose container, codecs,
sample rate and duration are part of the score (paper App. H.1.4 hard gates, §2.7 Format pillar), so
this module reads both streams and what the container says about them. Audio is handled as float32
mono in [-1, 1] at the stream's own sample rate.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

AUDIO_FRAME = 1024  # samples per AAC frame


class MediaError(ValueError):
    """A media file that cannot be used (missing, empty, undecodable). The message names the file."""


@dataclass(frozen=True)
class MediaInfo:
    path: str
    container: str  # PyAV/FFmpeg format name, e.g. "mov,mp4,m4a,3gp,3g2,mj2"
    video_codec: str | None
    audio_codec: str | None
    width: int
    height: int
    sample_aspect: float  # pixel aspect ratio (1.0 for square pixels)
    fps: float
    num_frames: int
    duration: float  # seconds: frames / fps when there is video, else the audio length
    sample_rate: int | None
    channels: int | None

    @property
    def has_video(self) -> bool:
        return self.video_codec is not None

    @property
    def has_audio(self) -> bool:
        return self.audio_codec is not None

    @property
    def display_aspect(self) -> float:
        return self.width * self.sample_aspect / self.height if self.height else float("nan")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Media:
    info: MediaInfo
    frames: np.ndarray | None  # uint8 RGB (T, H, W, 3): every frame, or those kept by ``keep_fps``
    audio: np.ndarray | None  # float32 mono (N,)
    frame_times: np.ndarray | None = None  # seconds of each frame in ``frames`` (index / fps)

    @property
    def fps(self) -> float:
        return self.info.fps

    @property
    def sample_rate(self) -> int | None:
        return self.info.sample_rate


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_file(path: Path) -> None:
    if not path.exists():
        raise MediaError(f"media file not found: {path}")
    if not path.is_file():
        raise MediaError(f"not a file: {path}")
    if path.stat().st_size == 0:
        raise MediaError(f"media file is empty: {path}")


def read_media(
    path: str | Path, video: bool = True, audio: bool = True, max_side: int | None = None, keep_fps: float | None = None
) -> Media:
    """Decode ``path``: its frames (``video``) and its first audio stream as mono float32 (``audio``).

    ``max_side`` downscales frames (area interpolation) so that their longest side is at most that many
    pixels; ``keep_fps`` keeps only the first frame at or after each tick of that rate (the rest are
    decoded and counted, not stored), which bounds memory for long deliverables. The returned ``info``
    counts every frame decoded (when ``video``), not the header's guess, and keeps the stream's size.
    """
    import av

    path = Path(path)
    _check_file(path)
    try:
        container = av.open(str(path))
    except Exception as exc:  # av raises its own error types
        raise MediaError(f"cannot open media file {path}: {type(exc).__name__}: {exc}") from exc
    with container:
        vs = container.streams.video[0] if container.streams.video else None
        as_ = container.streams.audio[0] if container.streams.audio else None
        frames = samples = None
        try:
            if vs is not None and video:
                frames, kept_idx, n_decoded = _decode_video(container, vs, max_side, keep_fps)
                container.seek(0)
            if as_ is not None and audio:
                samples = _decode_audio(container, as_)
        except MediaError:
            raise
        except Exception as exc:
            raise MediaError(f"cannot decode {path}: {type(exc).__name__}: {exc}") from exc
        info = _info(
            path,
            container,
            vs,
            as_,
            n_decoded if frames is not None else None,
            len(samples) if samples is not None else None,
        )
    arr = times = None
    if frames is not None:
        if not frames:
            raise MediaError(f"video stream of {path} has no frames")
        arr = np.stack(frames)
        times = np.asarray(kept_idx, np.float64) / info.fps if info.fps > 0 else np.zeros(len(kept_idx))
    if samples is not None and info.duration > 0 and info.sample_rate:
        # AAC pads its last frame: keep the audio no longer than the video it belongs to
        if info.has_video:
            samples = samples[: int(round(info.duration * info.sample_rate))]
    return Media(info=info, frames=arr, audio=samples, frame_times=times)


def _decode_video(container, stream, max_side: int | None, keep_fps: float | None):
    """Frames in decode order: ``(kept frames, their indices, number decoded)``."""
    import cv2

    rate = stream.average_rate or stream.guessed_rate
    fps = float(rate) if rate else 0.0
    frames, idx = [], []
    next_tick = 0.0
    n = 0
    for frame in container.decode(stream):
        i = n
        n += 1
        if keep_fps and fps > 0:
            if i / fps + 1e-9 < next_tick:
                continue
            next_tick += 1.0 / keep_fps
            while next_tick <= i / fps:
                next_tick += 1.0 / keep_fps
        img = frame.to_ndarray(format="rgb24")
        if max_side and max(img.shape[:2]) > max_side:
            h, w = img.shape[:2]
            scale = max_side / max(h, w)
            img = cv2.resize(img, (max(2, round(w * scale)), max(2, round(h * scale))), interpolation=cv2.INTER_AREA)
        frames.append(img)
        idx.append(i)
    return frames, idx, n


def probe_media(path: str | Path) -> MediaInfo:
    """Container, codecs, geometry, frame count (decoded), duration and audio format of ``path``.

    Both streams are decoded and counted, nothing is kept: memory does not grow with the file's length."""
    return probe_stream(path)[0]


def probe_stream(path: str | Path) -> tuple[MediaInfo, int]:
    """:func:`probe_media` and the number of audio samples :func:`read_media` would keep (0: no audio)."""
    import av

    path = Path(path)
    _check_file(path)
    try:
        container = av.open(str(path))
    except Exception as exc:
        raise MediaError(f"cannot open media file {path}: {type(exc).__name__}: {exc}") from exc
    with container:
        vs = container.streams.video[0] if container.streams.video else None
        as_ = container.streams.audio[0] if container.streams.audio else None
        n_frames = n_samples = None
        try:
            if vs is not None:
                n_frames = sum(1 for _ in container.decode(vs))
                container.seek(0)
            if as_ is not None:
                n_samples = sum(len(c) for c in _audio_chunks(container, as_))
        except Exception as exc:
            raise MediaError(f"cannot decode {path}: {type(exc).__name__}: {exc}") from exc
        info = _info(path, container, vs, as_, n_frames, n_samples)
    if vs is not None and not n_frames:
        raise MediaError(f"video stream of {path} has no frames")
    kept = n_samples or 0
    limit = audio_limit(info)
    return info, (min(kept, limit) if limit is not None else kept)


def _resize(img: np.ndarray, max_side: int | None) -> np.ndarray:
    import cv2

    if max_side and max(img.shape[:2]) > max_side:
        h, w = img.shape[:2]
        scale = max_side / max(h, w)
        img = cv2.resize(img, (max(2, round(w * scale)), max(2, round(h * scale))), interpolation=cv2.INTER_AREA)
    return img


def iter_frames(path: str | Path, max_side: int | None = None):
    """The frames of ``path`` (uint8 RGB, downscaled as in :func:`read_media`), decoded one at a time."""
    import av

    with av.open(str(path)) as container:
        if not container.streams.video:
            return
        for frame in container.decode(container.streams.video[0]):
            yield _resize(frame.to_ndarray(format="rgb24"), max_side)


def iter_audio(path: str | Path, limit: int | None = None):
    """The first audio stream of ``path`` as mono float32 chunks, as decoded (at most ``limit`` samples
    in all: :func:`read_media` keeps the audio no longer than the video)."""
    import av

    with av.open(str(path)) as container:
        if not container.streams.audio:
            return
        left = limit
        for chunk in _audio_chunks(container, container.streams.audio[0]):
            if left is not None:
                chunk = chunk[:left]
                left -= len(chunk)
            if len(chunk):
                yield chunk
            if left is not None and left <= 0:
                return


def audio_limit(info: MediaInfo) -> int | None:
    """How many samples :func:`read_media` keeps: no more than the video's duration (AAC pads its end)."""
    if info.has_video and info.duration > 0 and info.sample_rate:
        return int(round(info.duration * info.sample_rate))
    return None


def _audio_chunks(container, stream):
    import av

    resampler = av.AudioResampler(format="fltp", layout="mono", rate=stream.codec_context.sample_rate)
    for frame in container.decode(stream):
        for out in resampler.resample(frame):
            yield out.to_ndarray()[0].astype(np.float32)
    for out in resampler.resample(None):
        yield out.to_ndarray()[0].astype(np.float32)


def _decode_audio(container, stream) -> np.ndarray:
    chunks = list(_audio_chunks(container, stream))
    return np.concatenate(chunks).astype(np.float32) if chunks else np.zeros(0, np.float32)


def _info(path: Path, container, vs, as_, n_frames: int | None, n_samples: int | None) -> MediaInfo:
    fps = 0.0
    width = height = 0
    sar = 1.0
    if vs is not None:
        rate = vs.average_rate or vs.guessed_rate
        fps = float(rate) if rate else 0.0
        width, height = vs.codec_context.width, vs.codec_context.height
        ratio = vs.sample_aspect_ratio or vs.codec_context.sample_aspect_ratio
        sar = float(ratio) if ratio and float(ratio) > 0 else 1.0
        if n_frames is None:
            n_frames = vs.frames or 0
    sr = as_.codec_context.sample_rate if as_ is not None else None
    if vs is not None and fps > 0 and n_frames:
        duration = n_frames / fps
    elif as_ is not None and n_samples and sr:
        duration = n_samples / sr
    else:
        duration = float(container.duration) / 1e6 if container.duration else 0.0
    return MediaInfo(
        path=str(path),
        container=container.format.name,
        video_codec=vs.codec_context.name if vs is not None else None,
        audio_codec=as_.codec_context.name if as_ is not None else None,
        width=int(width),
        height=int(height),
        sample_aspect=sar,
        fps=fps,
        num_frames=int(n_frames or 0),
        duration=float(duration),
        sample_rate=int(sr) if sr else None,
        channels=as_.codec_context.channels if as_ is not None else None,
    )


def write_media(
    path: str | Path,
    frames: np.ndarray,
    fps: float,
    audio: np.ndarray | None = None,
    sample_rate: int | None = None,
    crf: int = 18,
    video_codec: str = "libx264",
    audio_codec: str = "aac",
) -> Path:
    """Write uint8 RGB frames ``(T, H, W, 3)`` (H, W even) and optional mono float audio to ``path``.

    The container is chosen by FFmpeg from the file extension (``.mp4`` -> MP4).
    """
    import av

    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or frames.shape[0] == 0:
        raise ValueError(f"expected uint8 frames of shape (T>0, H, W, 3), got {frames.dtype} {frames.shape}")
    t, h, w, _ = frames.shape
    if h % 2 or w % 2:
        raise ValueError(f"h264/yuv420p needs even width and height, got {w}x{h}")
    if audio is not None and not sample_rate:
        raise ValueError("audio needs a sample_rate")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w") as container:
        vs = container.add_stream(video_codec, rate=Fraction(fps).limit_denominator(1001))
        vs.width, vs.height, vs.pix_fmt = w, h, "yuv420p"
        if video_codec == "libx264":
            vs.options = {"crf": str(crf), "preset": "veryfast"}
        as_ = None
        if audio is not None:
            as_ = container.add_stream(audio_codec, rate=int(sample_rate))
            as_.layout = "mono"
        for frame in frames:
            for packet in vs.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in vs.encode():
            container.mux(packet)
        if as_ is not None:
            pcm = np.clip(np.asarray(audio, np.float32).reshape(-1), -1.0, 1.0)
            fmt = "fltp" if audio_codec == "aac" else "s16"
            for start in range(0, len(pcm), AUDIO_FRAME):
                chunk = pcm[start : start + AUDIO_FRAME]
                data = chunk[None, :] if fmt == "fltp" else (chunk * 32767).astype(np.int16)[None, :]
                af = av.AudioFrame.from_ndarray(data, format=fmt, layout="mono")
                af.sample_rate, af.pts = int(sample_rate), start
                for packet in as_.encode(af):
                    container.mux(packet)
            for packet in as_.encode():
                container.mux(packet)
    return path
