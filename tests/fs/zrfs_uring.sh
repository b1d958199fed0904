#!/bin/sh
# zrfs_uring.sh: zrfs with -o uring added, for the fs.*.uring variants
# (lib.sh points $ZRFS here and the real binary is $ZRFS_PLAIN).
exec "$ZRFS_PLAIN" "$@" -o uring
