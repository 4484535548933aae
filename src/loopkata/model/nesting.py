"""How deep a JSON or TOML text nests its arrays and tables, counted in one pass without parsing it.

Python's json and tomllib recurse once per level: a file nested a few thousand deep ends in a
RecursionError before either says what is wrong. Readers of files they do not trust ask here
first. Each scan visits only the characters that can open or close a string, a comment or a
level, and never goes back, so its time grows with the text's length and nothing else.
"""
from __future__ import annotations

import re

# The depth a TOML file read by loopkata may nest: a catalogue nests 2 deep and a pyproject.toml
# seldom more than 4, while tomllib runs out of stack at about 340 levels of inline tables (fewer
# when called from deep inside pytest).
TOML_DEPTH = 64

_JSON_MARKS = re.compile(r'["\\\[\]{}]')
_TOML_MARKS = re.compile(r"[\"'\\#\n\[\]{}]")


def json_too_deep(text: str, limit: int) -> bool:
    """Whether the JSON `text` nests arrays and objects more than `limit` deep (brackets inside
    strings do not count; a text that is not JSON is left for the parser to refuse)."""
    depth, in_string, resume = 0, False, 0
    for mark in _JSON_MARKS.finditer(text):
        at = mark.start()
        if at < resume:  # the character a backslash escapes
            continue
        c = mark.group()
        if in_string:
            if c == "\\":
                resume = at + 2
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > limit:
                return True
        elif c in "]}":
            depth -= 1
    return False


def toml_too_deep(text: str, limit: int) -> bool:
    """Whether the TOML `text` nests arrays and inline tables more than `limit` deep; a table
    header counts as its brackets ([[kata]] is 2 deep), strings and comments do not count."""
    depth, resume, n = 0, 0, len(text)
    inside = ""  # "" (among keys and values), "#", or the quote that ends the string: " ' \"\"\" '''
    for mark in _TOML_MARKS.finditer(text):
        at = mark.start()
        if at < resume:
            continue
        c = mark.group()
        if inside == "#":
            if c == "\n":
                inside = ""
        elif inside in ('"', "'"):
            if c == "\\" and inside == '"':
                resume = at + 2
            elif c == inside or c == "\n":  # a string cut by a line's end is the parser's error to name
                inside = ""
        elif inside:  # a multi-line string: ends at three quotes, which may be preceded by two of its own
            if c == "\\" and inside == '"""':
                resume = at + 2
            elif c == inside[0] and text.startswith(inside, at):
                end = at
                while end < n and text[end] == c:
                    end += 1
                inside, resume = "", end
        elif c in "\"'":
            if text.startswith(c * 3, at):
                inside, resume = c * 3, at + 3
            else:
                inside = c
        elif c == "#":
            inside = "#"
        elif c in "[{":
            depth += 1
            if depth > limit:
                return True
        elif c in "]}":
            depth -= 1
    return False
