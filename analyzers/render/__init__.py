"""Renderers: take analysis results (never argv) and write text, JSON, CSV or HTML.

``registry`` maps (result type, format) to the renderer; one module per renderer.
"""
