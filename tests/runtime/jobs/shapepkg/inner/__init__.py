"""The inner package (imports nothing: its engine module is the first to import torch)."""
