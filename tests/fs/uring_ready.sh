#!/bin/sh
# uring_ready.sh: exit 0 if this kernel serves FUSE requests through
# io_uring rings now; else exit 1 and say why on standard output.
p=/sys/module/fuse/parameters/enable_uring
if [ ! -e "$p" ]; then
	echo "FUSE over io_uring unavailable: this kernel has no $p (it needs Linux 6.14 or later built with CONFIG_FUSE_IO_URING)"
	exit 1
fi
if [ "$(cat "$p")" != Y ]; then
	echo "FUSE over io_uring is off: $p is N (tests/run.sh turns it on when run as root)"
	exit 1
fi
d=$(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo 0)
if [ "$d" = 2 ] || { [ "$d" = 1 ] && [ "$(id -u)" != 0 ]; }; then
	echo "io_uring is disabled here (kernel.io_uring_disabled = $d)"
	exit 1
fi
exit 0
