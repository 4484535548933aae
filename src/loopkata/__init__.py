"""Loop Katas: graded notebooks and katas for asyncio bugs that only show in production.

In a notebook: `from loopkata import check; check("bound-semaphore")`.
From a shell: `loopkata --help`.
"""

__all__ = ["check", "ask", "progress_table", "run_isolated", "once_solved", "pristine_starter", "decoy_copy",
           "variant_copy"]


def __getattr__(name):
    # The widgets are imported only when a notebook asks for them, so the CLI
    # and the grader's subprocess start fast.
    if name in ("check", "ask", "progress_table", "once_solved", "pristine_starter", "decoy_copy", "variant_copy"):
        from . import panel

        return getattr(panel, name)
    if name == "run_isolated":
        from .grading.repro import run_isolated

        return run_isolated
    raise AttributeError(name)
