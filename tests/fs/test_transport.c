/*
 * Description: the io_uring transport's reassembly of a request
 * (fs/transport.c, zrfs_ring_request) without a mount: the kernel hands the
 * fuse_in_header, the opcode's fixed argument and the payload in three
 * places; put back together they are the bytes /dev/fuse would have given,
 * contiguous, whatever the sizes (no fixed argument, a full 128-byte area,
 * a payload of the largest size); sizes that do not add up are refused.
 */
#include "zrfs_i.h"

#include <criterion/criterion.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <string.h>

TestSuite(transport);

#define CAP (1 << 20)

struct parts {
	char in_out[128];
	char op_in[128];
	char *payload;
};

/* A request of @op bytes of fixed argument and @payload bytes, each byte
 * numbered; and the bytes /dev/fuse would deliver for it in @want. */
static struct parts make(uint32_t opcode, size_t op, size_t payload, char **want, size_t *len)
{
	struct parts p = {.payload = malloc(CAP)};
	struct fuse_in_header in = {.len = (uint32_t)(sizeof in + op + payload),
				    .opcode = opcode, .unique = 42, .nodeid = 7};

	cr_assert_not_null(p.payload);
	memcpy(p.in_out, &in, sizeof in);
	for (size_t i = 0; i < op; i++)
		p.op_in[i] = (char)(i * 3 + 1);
	for (size_t i = 0; i < payload; i++)
		p.payload[i] = (char)(i * 7 + 5);
	*len = in.len;
	*want = malloc(*len);
	cr_assert_not_null(*want);
	memcpy(*want, &in, sizeof in);
	memcpy(*want + sizeof in, p.op_in, op);
	memcpy(*want + sizeof in + op, p.payload, payload);
	return p;
}

static void round_trip(uint32_t opcode, size_t op, size_t payload)
{
	char *want, *buf = malloc(ZRFS_RING_HEAD + CAP);
	size_t len;
	struct parts p = make(opcode, op, payload, &want, &len);

	cr_assert_not_null(buf);
	char *at = zrfs_ring_request(p.in_out, p.op_in, p.payload, (uint32_t)payload, CAP, buf);
	cr_assert_not_null(at, "opcode %u, %zu + %zu bytes refused", opcode, op, payload);
	cr_assert(at >= buf && at + len <= buf + ZRFS_RING_HEAD + CAP);
	cr_assert_eq(memcmp(at, want, len), 0, "opcode %u, %zu + %zu bytes differ", opcode, op,
		     payload);
	free(want);
	free(buf);
	free(p.payload);
}

Test(transport, lookup_has_no_fixed_argument)
{
	round_trip(FUSE_LOOKUP, 0, 6); /* the name and its NUL */
}

Test(transport, read_is_its_fixed_argument_only)
{
	round_trip(FUSE_READ, sizeof(struct fuse_read_in), 0);
}

Test(transport, write_of_the_largest_payload)
{
	round_trip(FUSE_WRITE, sizeof(struct fuse_write_in), CAP);
}

Test(transport, a_fixed_argument_filling_its_area)
{
	round_trip(FUSE_SETATTR, 128, 3);
}

Test(transport, sizes_that_do_not_add_up_are_refused)
{
	char *want, *buf = malloc(ZRFS_RING_HEAD + CAP);
	size_t len;
	struct parts p = make(FUSE_WRITE, 40, 100, &want, &len);
	struct fuse_in_header in;

	cr_assert_not_null(buf);
	/* a payload longer than the header's len */
	cr_assert_null(zrfs_ring_request(p.in_out, p.op_in, p.payload, 200, CAP, buf));
	/* a payload larger than the buffers */
	cr_assert_null(zrfs_ring_request(p.in_out, p.op_in, p.payload, 100, 99, buf));
	/* a fixed argument larger than its area */
	memcpy(&in, p.in_out, sizeof in);
	in.len = (uint32_t)(sizeof in + 129 + 100);
	memcpy(p.in_out, &in, sizeof in);
	cr_assert_null(zrfs_ring_request(p.in_out, p.op_in, p.payload, 100, CAP, buf));
	/* a len shorter than the header */
	in.len = 8;
	memcpy(p.in_out, &in, sizeof in);
	cr_assert_null(zrfs_ring_request(p.in_out, p.op_in, p.payload, 0, CAP, buf));
	free(want);
	free(buf);
	free(p.payload);
}
