"""Tools for the project's authors: the glossary's links, the tables the docs carry, the README's screenshot.

Each is run by hand or by the suite (`python -m loopkata.authoring.tables --write`); no learner
or grader code imports them.
"""
