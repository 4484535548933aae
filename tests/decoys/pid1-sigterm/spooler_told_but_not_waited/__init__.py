"""Decoy: SIGTERM handled, exec, and a cleanup that closes the spooler's stdin without waiting for it.

Everything works until PID 1 exits: the kernel then kills every other process in the PID
namespace with SIGKILL, and the spooler is still uploading its batch.
"""
