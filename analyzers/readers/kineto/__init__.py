"""readers.kineto"""
