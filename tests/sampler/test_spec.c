/*
 * Description: sampler specs (sampler/spec.c): parsing with defaults,
 * canonical printing (parse . format is the identity, any key order gives
 * one name), and rejection of everything malformed or out of range with a
 * message saying why.
 */
#include "zrsampler.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

TestSuite(spec);

static void canonical(const char *in, const char *want)
{
	zs_spec s;
	char buf[ZS_SPEC_MAX + 1];
	cr_assert_eq(zs_spec_parse(in, &s), 0, "'%s': %s", in, zs_errmsg());
	cr_assert_geq(zs_spec_format(&s, buf, sizeof buf), 0, "%s", zs_errmsg());
	cr_assert_str_eq(buf, want, "'%s' prints as '%s', want '%s'", in, buf, want);
	zs_spec again;
	cr_assert_eq(zs_spec_parse(buf, &again), 0);
	cr_assert_eq(memcmp(&s, &again, sizeof s), 0, "'%s' does not round-trip", in);
}

Test(spec, parse_and_print_canonically)
{
	canonical("shuffle,seed=42,batch=256", "shuffle,seed=42,batch=256");
	canonical("shuffle,batch=256,seed=42", "shuffle,seed=42,batch=256");
	canonical("shuffle,seed=42,batch=256,rank=0,world=8", "shuffle,seed=42,batch=256,world=8");
	canonical("seq", "seq");
	canonical("seq,batch=1,world=1,rank=0,lo=0,tail=drop", "seq");
	canonical("block,seed=1,batch=32", "block,seed=1,batch=32");
	canonical("block,block=4096,seed=1,batch=32", "block,seed=1,batch=32");
	canonical("block,block=64,batch=32,tail=keep", "block,batch=32,tail=keep,block=64");
	canonical("window,window=16", "window,window=16");
	canonical("window,stride=4,window=16,lo=10,hi=1000", "window,lo=10,hi=1000,window=16,stride=4");
	canonical("random,seed=18446744073709551615,batch=16777216,rank=65534,world=65535,tail=pad",
		  "random,seed=18446744073709551615,batch=16777216,rank=65534,world=65535,tail=pad");
}

Test(spec, defaults)
{
	zs_spec s;
	cr_assert_eq(zs_spec_parse("shuffle", &s), 0);
	cr_assert_eq(s.order, ZS_SHUFFLE);
	cr_assert_eq(s.seed, 0);
	cr_assert_eq(s.batch, 1);
	cr_assert_eq(s.rank, 0);
	cr_assert_eq(s.world, 1);
	cr_assert_eq(s.lo, 0);
	cr_assert_eq(s.hi, 0);
	cr_assert_eq(s.tail, ZS_DROP);
	cr_assert_eq(zs_spec_parse("block", &s), 0);
	cr_assert_eq(s.block, 4096);
	cr_assert_eq(zs_spec_parse("window,window=5", &s), 0);
	cr_assert_eq(s.stride, 5);
	cr_assert_eq(s.batch, 5);
}

static void rejected(const char *in, const char *says)
{
	zs_spec s;
	cr_assert_eq(zs_spec_parse(in, &s), ZS_EINVAL_SPEC, "'%s' accepted", in);
	cr_assert_not_null(strstr(zs_errmsg(), says), "'%s': message '%s' lacks '%s'", in,
			   zs_errmsg(), says);
}

Test(spec, malformed_input_is_rejected_with_a_reason)
{
	rejected("", "1..255");
	rejected("shuffle,", "KEY=VALUE");
	rejected(",seed=1", "unknown order");
	rejected("Shuffle", "not one of");
	rejected("shuffle seed=1", "not one of");
	rejected("shuffle,seed=1/../x", "not one of");
	rejected("shuffle,seed=1.5", "not one of");
	rejected("shuffle,seed=-1", "not one of");
	rejected("shuffle,seed=0x10", "leading zeros");
	rejected("shuffle,seed=1x0", "not a number");
	rejected("shuffle,seed", "KEY=VALUE");
	rejected("shuffle,seed=", "not a decimal");
	rejected("shuffle,seed=007", "leading zeros");
	rejected("shuffle,seed=18446744073709551616", "out of range");
	rejected("shuffle,seed=99999999999999999999999", "out of range");
	rejected("shuffle,seed=1,seed=2", "given twice");
	rejected("shuffle,colour=3", "unknown key");
	rejected("shuffle,batch=0", "batch: 0 is out of range");
	rejected("shuffle,batch=16777217", "out of range");
	rejected("shuffle,world=0", "world");
	rejected("shuffle,world=65536", "world");
	rejected("shuffle,rank=8,world=8", "rank 8 is not below world 8");
	rejected("shuffle,rank=1", "rank 1 is not below world 1");
	rejected("shuffle,lo=10,hi=10", "empty");
	rejected("shuffle,lo=10,hi=5", "empty");
	rejected("shuffle,hi=281474976710657", "out of range");
	rejected("shuffle,tail=maybe", "drop, keep or pad");
	rejected("shuffle,window=4", "belong to the window order");
	rejected("shuffle,block=4", "belongs to the block order");
	rejected("window", "window=W");
	rejected("window,window=4,batch=4", "a batch is one window");
	rejected("window,window=4,tail=keep", "a batch is one window");
	rejected("window,window=4,stride=0", "out of range");
	rejected("block,block=0", "out of range");
	char longer[300];
	memset(longer, 0, sizeof longer);
	strcpy(longer, "shuffle");
	while (strlen(longer) < 260)
		strcat(longer, ",seed=1");
	rejected(longer, "1..255");
}

Test(spec, format_checks_its_input)
{
	zs_spec s = {.order = ZS_SHUFFLE, .batch = 0, .world = 1};
	char buf[8];
	cr_assert_eq(zs_spec_format(&s, buf, sizeof buf), ZS_EINVAL_SPEC);
	s.batch = 1;
	s.seed = 123456789;
	cr_assert_eq(zs_spec_format(&s, buf, sizeof buf), -ENOBUFS);
}

Test(spec, keys_are_known_by_name_and_length)
{
	static const char *const keys[] = {"seed", "batch", "rank", "world", "lo",
					   "hi", "tail", "window", "stride", "block"};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		cr_assert(zs_spec_is_key(keys[i], strlen(keys[i])), "%s", keys[i]);
	/* the length decides, not a NUL: "seed=1" up to its '=' is a key */
	cr_assert(zs_spec_is_key("seed=1", 4));
	cr_assert(!zs_spec_is_key("seed=1", 6));
	cr_assert(!zs_spec_is_key("see", 3));
	cr_assert(!zs_spec_is_key("shuffle", 7), "an order is not a key");
	cr_assert(!zs_spec_is_key("max_threads", 11));
	cr_assert(!zs_spec_is_key("", 0));
}
