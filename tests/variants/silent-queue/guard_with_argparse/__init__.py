"""Variant: a guard that lets argparse read the worker's options.
"""
