"""readers.nsys"""
