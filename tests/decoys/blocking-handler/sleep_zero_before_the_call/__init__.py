"""Decoy: `await asyncio.sleep(0)` before the blocking model call, to "give the loop a turn": it gets one turn, then waits for the model all the same.

An await hands the loop back only for as long as it is suspended. sleep(0)
lets the loop run what is ready at that instant, and then create_draft
resumes and calls model.complete(), which holds the event loop thread until
the model answers: /health waits exactly as long as before. Adding the await
also made the endpoint look reviewed.
"""
