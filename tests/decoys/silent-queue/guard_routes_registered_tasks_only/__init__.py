"""Decoy: a guard that takes the routed queues from the app's router, asked about each task this process registered.

It is right about every task defined here, however the routes are spelled.
But a route also sends tasks that other code defines and this app sends by
name (an "export.*" route for another service's tasks): no registered task
goes to that queue, so the guard never looks at it, and a deploy that leaves
it without a consumer passes.
"""
