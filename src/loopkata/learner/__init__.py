"""The learner's own state and tools: progress, backups, hints, questions, the export for a facilitator,
the lab launcher.

The two front ends that use them, the `loopkata` command and the notebook widgets, are
loopkata.cli and loopkata.panel.
"""
