"""Variant: a monitor that reads nr_throttled at every sample and counts the late samples that fell in a throttled period.
"""
