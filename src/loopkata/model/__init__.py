"""The kata model, at the bottom: the catalogue (the one description of every kata) and the shipped starters.

Everything else stands on this package; it imports nothing else of loopkata.
"""
