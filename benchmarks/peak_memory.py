"""Extra peak memory of a process, from Linux's /proc (used by the benchmark and the tests)."""


def status_mib(field):
    """A size field of /proc/self/status (VmRSS, VmHWM, ...) in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field)


def start_peak_measurement():
    """Resets this process's peak resident size (VmHWM) and returns the current size, in MiB.

    ru_maxrss cannot serve here: a child process inherits its parent's peak.
    """
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return status_mib("VmRSS")


def extra_peak_mib(before):
    return status_mib("VmHWM") - before
