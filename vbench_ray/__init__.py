"""vbench-ray: a Ray-based distributed batch evaluator for video-editing and video-understanding benchmarks."""

__version__ = "0.1.0"
