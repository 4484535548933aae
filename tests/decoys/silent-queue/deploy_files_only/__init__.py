"""Decoy: fix the deploy files, leave the guard as it was.

Both deploys work today. The guard that was meant to keep it that way still
reads only the first worker line and only the "-Q " spelling, so the next
deploy file written another way is judged wrongly.
"""
