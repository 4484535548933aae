"""`loopkata guard`: the collection's bugs caught at run time, in a team's own tests or program.

`pytest -p loopkata.guard` loads this module as a pytest plugin (its hooks are
those of `pytest_plugin`); `loopkata guard -- COMMAND` runs a program guarded
(`wrapper`). The kinds of finding are in `findings.KINDS`, one watcher each:

- `bound`: loop-bound asyncio objects, transports and sessions used on a second loop (LG01);
- `loops`, `chains`: every loop made, the ones a test leaves alive and what holds them (LG02), unclosed (LG07);
- `tasks`: pending tasks destroyed or cancelled at shutdown (LG03), exceptions never retrieved (LG06);
- `blocked`: a loop held by one callback, its stack sampled while held (LG04);
- `thread_locks`: a thread asking for a Lock it holds (LG05);
- `swallowed`: gathered exceptions logged without their traceback (LG06);
- `unclosed`: aiohttp sessions and connectors collected open (LG07);
- `generators`: a timeout that cancelled an async generator's step (LG08);
- `celery_queues`: tasks sent to a queue no worker consumes (LG09);
- `core`: one guarded run; `child`, `boot/`: the guard handed on to child processes;
- `config`, `report`, `sites`, `patches`: settings, output, the team's lines, undoable patches.
"""
from .pytest_plugin import (  # noqa: F401 - the hooks pytest finds on this module
    pytest_addoption,
    pytest_configure,
    pytest_fixture_setup,
    pytest_runtest_makereport,
    pytest_runtest_protocol,
    pytest_runtest_teardown,
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_testnodedown,
    pytest_unconfigure,
)
