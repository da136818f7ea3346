"""stalls"""
