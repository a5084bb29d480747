"""Decoding, sampling, encoding, optical flow and the frame stage."""
