/*
 * Unhalt probe guest: the command line, "scenario=NAME key=value ...".
 * Copied out of start_info at boot (its page may be reused later).
 */
#include "probe.h"

static char cmdline[4096];

void cmdline_init(const struct hvm_start_info *si)
{
	cmdline[0] = 0;
	if (!si || !si->cmdline_paddr)
		return;
	const char *src = (const char *)si->cmdline_paddr;
	size_t i = 0;
	for (; i < sizeof cmdline - 1 && src[i]; i++)
		cmdline[i] = src[i];
	cmdline[i] = 0;
}

const char *cmdline_raw(void) { return cmdline; }

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Last occurrence wins, as with kernel parameters. */
bool cmdline_get(const char *key, char *out, size_t outsize)
{
	size_t klen = strlen(key);
	bool found = false;
	const char *p = cmdline;
	while (*p) {
		while (is_space(*p))
			p++;
		const char *w = p;
		while (*p && !is_space(*p))
			p++;
		size_t wlen = (size_t)(p - w);
		if (wlen > klen && w[klen] == '=' && !memcmp(w, key, klen)) {
			size_t vlen = wlen - klen - 1;
			if (vlen > outsize - 1)
				vlen = outsize - 1;
			memcpy(out, w + klen + 1, vlen);
			out[vlen] = 0;
			found = true;
		}
	}
	return found;
}

/* Decimal or 0x-hex; the default when absent or malformed. */
u64 cmdline_u64(const char *key, u64 dflt)
{
	char v[32];
	if (!cmdline_get(key, v, sizeof v) || !v[0])
		return dflt;
	u64 r = 0;
	const char *p = v;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		p += 2;
		if (!*p)
			return dflt;
		for (; *p; p++) {
			char c = *p;
			unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
			           : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
			           : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 99;
			if (d > 15)
				return dflt;
			r = r * 16 + d;
		}
		return r;
	}
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return dflt;
		r = r * 10 + (u64)(*p - '0');
	}
	return r;
}
