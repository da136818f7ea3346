"""Trace readers, one module per format; each turns a file into one Timeline per rank.

``base`` says what a reader is, ``registry`` lists them (Kineto, Nsight Systems).
"""
