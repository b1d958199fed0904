/*
 * error.c - error codes and messages.
 *
 * Every failing library call records a human message (which file, which id,
 * what was wrong) in a thread-local buffer and returns a negative code; the
 * caller reads the message with zr_errmsg() and the code with zr_strerror().
 */
#include "store_i.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char errmsg[1024];

int zr_err(int code, const char *fmt, ...)
{
	char buf[sizeof errmsg];
	va_list ap;

	/* through a copy: callers may pass zr_errmsg() itself as an argument */
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	memcpy(errmsg, buf, sizeof buf);
	return code;
}

const char *zr_errmsg(const zr_dataset *ds)
{
	(void)ds;
	return errmsg;
}

const char *zr_strerror(int code)
{
	switch (code) {
	case 0:
		return "success";
	case ZR_ECORRUPT:
		return "dataset is corrupt";
	case ZR_EVERSION:
		return "unsupported dataset format version";
	case ZR_EINVAL_SPEC:
		return "malformed specification";
	}
	if (code < 0 && code > -4096)
		return strerror(-code);
	return "unknown error";
}
