"""Texts to vectors: models, resumable and sharded encoding, ONNX export."""
