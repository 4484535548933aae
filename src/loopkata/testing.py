"""The public entry point for hidden tests: run a learner's code with a hang guard.

    from loopkata.testing import Hang, run_bounded, hang_after, describe_frames, where_stuck, loops_alive, Deadline

Kata authors import from here; the engine's own modules import from loopkata.grading,
where these live (bounded: the guard; hangs: where a scenario is stuck; frames: the
learner's lines of a stack; clocks: a SteppingClock, by which anything timed takes exactly
its step, and an event loop whose clock jumps to its next timer; cpu_wait: a Deadline that a
busy machine moves back, for every wait a right fix must finish within, and CpuWait, how long
given processes waited for a CPU; properties: the seed of a property-based test's examples,
and the words that replay them).
"""
from .grading.bounded import DEFAULT_HANG_AFTER, POLL_SECONDS, Hang, Interrupted, hang_after, loops_alive, run_bounded
from .grading.clocks import SteppingClock, VirtualClockLoop, on_a_virtual_clock
from .grading.cpu_wait import CpuWait, Deadline
from .grading.frames import describe_frames, impl_root, is_learner_file
from .grading.hangs import where_stuck
from .grading.properties import NO_HYPOTHESIS, property_seed, replay_words
from .model.paths import display_path
from .services.containers import TooBusy

__all__ = ["TooBusy", "CpuWait", "Deadline", "DEFAULT_HANG_AFTER", "POLL_SECONDS", "Hang", "Interrupted", "hang_after", "loops_alive", "run_bounded",
           "describe_frames", "impl_root", "is_learner_file", "where_stuck", "display_path", "SteppingClock", "VirtualClockLoop", "on_a_virtual_clock",
           "NO_HYPOTHESIS", "property_seed", "replay_words"]
