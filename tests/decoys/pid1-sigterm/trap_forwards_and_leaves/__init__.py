"""Decoy: the entrypoint traps SIGTERM and forwards it to the service, then ends.

The trap interrupts `wait`, the script ends, and the shell, PID 1, exits while the service is
still stopping: the kernel kills the rest of the namespace with SIGKILL, and the export in
flight and the cleanup are cut off.
"""
