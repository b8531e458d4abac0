/*
 * Unhalt probe guest: a virtio-net driver (virtio 1.x over PCI: receive queue 0, transmit queue
 * 1, VIRTIO_NET_F_MAC, MSI-X) and hand-built Ethernet/IPv4/UDP/TCP frames — no IP stack — for
 * the scenarios of docs/guest-contract.md:
 *
 *   scenario=net-dhcp                 DHCPDISCOVER, report the DHCPOFFER
 *   scenario=net-connect port=P       DHCP, ARP for the gateway, a TCP SYN to 10.0.2.2:P, report the answer
 *   scenario=net-listen port=P        DHCP, then wait (wait_ms) for a TCP SYN to our port P
 *   scenario=net-udp-rr port=P        DHCP, ARP, then `rounds` UDP datagrams of `bytes` to the
 *                                     gateway's port P, each waited for until it comes back (an echo
 *                                     server on the host): request-response round trips by the TSC
 *   scenario=net-tcp-rr port=P        the same over one TCP connection to the gateway's port P (handshake,
 *                                     `rounds` requests of `bytes` each echoed and ACKed, FIN both ways)
 *
 * ip=A.B.C.D gw=A.B.C.D (net-connect, net-listen, net-udp-rr, net-tcp-rr) skips DHCP: a static address, e.g. on a TAP
 * with no DHCP server.
 *
 * Every frame carries the 12-byte virtio_net_hdr (VERSION_1) in a descriptor of its own ahead
 * of the frame (transmit: two descriptors, header then frame; receive: one 2 KiB buffer each).
 * ARP requests for our address are answered whatever the scenario waits for.
 */
#include "virtio.h"

#define VNET_DEVICE 0x1041
#define QS 16
#define HDR 12
#define RXBUF 2048
#define FRAME_MAX 1514

#define F_MAC (1u << 5)
#define F_STATUS (1u << 16)

static struct virtio_pci vnet;
static struct virtq rxq __attribute__((aligned(4096)));
static struct virtq txq __attribute__((aligned(4096)));
static u8 rxbuf[QS][RXBUF] __attribute__((aligned(64)));
static u8 txhdr[HDR] __attribute__((aligned(16)));
static u8 txframe[FRAME_MAX] __attribute__((aligned(64)));
static u8 mac[6], gw_mac[6];
static u32 my_ip;   /* host byte order; 0 until DHCP offered one */
static const u8 broadcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

/* ---- byte order and checksums ---- */
static void put16(u8 *p, u16 v) { p[0] = (u8)(v >> 8); p[1] = (u8)v; }
static void put32(u8 *p, u32 v) { put16(p, (u16)(v >> 16)); put16(p + 2, (u16)v); }
static u16 get16(const u8 *p) { return (u16)(p[0] << 8 | p[1]); }
static u32 get32(const u8 *p) { return (u32)get16(p) << 16 | get16(p + 2); }
static u64 mac48(const u8 *m) { return (u64)get16(m) << 32 | get32(m + 2); }

static u32 sum16(const u8 *p, u32 n, u32 acc)
{
	for (u32 i = 0; i + 1 < n; i += 2)
		acc += get16(p + i);
	if (n & 1)
		acc += (u32)p[n - 1] << 8;
	return acc;
}
static u16 fold(u32 acc)
{
	while (acc >> 16)
		acc = (acc & 0xFFFF) + (acc >> 16);
	return (u16)~acc;
}

static NORETURN void fail(const char *scenario, u32 stage, const char *what)
{
	event("%s ok=0 stage=%u", scenario, stage);
	con_printf("%s: FAILED at %s\n", scenario, what);
	power_off();
}

/* ---- the device ---- */
static void notify(struct virtq *q)
{
	virtq_kick(q);
}

/* The transport's failures as this scenario's stages (docs/guest-contract.md). */
static const u8 stage_of[VIRTIO_ERRORS] = {
	[VIRTIO_NO_DEVICE] = 1, [VIRTIO_CAPABILITIES] = 2, [VIRTIO_RESET] = 6, [VIRTIO_NO_VERSION_1] = 3,
	[VIRTIO_MISSING_FEATURE] = 3, [VIRTIO_FEATURES_OK] = 4, [VIRTIO_NUM_QUEUES] = 5, [VIRTIO_MSIX_CONFIG] = 7,
	[VIRTIO_QUEUE_SIZE] = 8, [VIRTIO_QUEUE_MSIX] = 9,
};

/* Finds, resets and starts the device; every receive buffer posted. Returns 0 or a failure stage. */
static u32 vnet_init(void)
{
	/* MSI-X: receive (0) and transmit (1) on the virtio-rng scenario's queue vector, configuration (2) on its own. */
	enum virtio_error e = virtio_pci_probe(&vnet, VNET_DEVICE, 0, 3, VIRTIO_NEED_DEVCFG);
	if (!e)
		e = virtio_negotiate(&vnet, F_MAC | F_STATUS, F_MAC, 2);
	if (!e)
		e = virtio_queue_setup(&vnet, &rxq, 0, QS, 0);
	if (!e)
		e = virtio_queue_setup(&vnet, &txq, 1, QS, 1);
	if (e)
		return stage_of[e];
	for (u32 i = 0; i < 6; i++)
		mac[i] = rd8(vnet.devcfg + i);
	u16 link = (vnet.features & F_STATUS) ? rd16(vnet.devcfg + 6) : 1;
	virtio_driver_ok(&vnet);
	for (u16 i = 0; i < QS; i++) {
		rxq.desc[i] = (struct virtq_desc){ .addr = (u64)rxbuf[i], .len = RXBUF, .flags = VIRTQ_DESC_F_WRITE, .next = 0 };
		rxq.avail.ring[i] = i;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	rxq.avail.idx = QS;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	notify(&rxq);
	u32 dev = vnet.slot;
	con_printf("virtio-net 00:%02x.0 mac %02x:%02x:%02x:%02x:%02x:%02x link %s\n", dev, mac[0], mac[1], mac[2], mac[3],
	           mac[4], mac[5], link & 1 ? "up" : "down");
	event("net_up slot=%u mac=%lu link=%u", dev, mac48(mac), link & 1);
	return 0;
}

/* Sends one frame (header and frame in two descriptors) and waits until the device has taken it. */
static bool vnet_send(u32 len)
{
	memset(txhdr, 0, HDR);
	txq.desc[0] = (struct virtq_desc){ .addr = (u64)txhdr, .len = HDR, .flags = VIRTQ_DESC_F_NEXT, .next = 1 };
	txq.desc[1] = (struct virtq_desc){ .addr = (u64)txframe, .len = len, .flags = 0, .next = 0 };
	virtq_post(&txq, 0);
	notify(&txq);
	u64 end = slow_host_deadline_us(1000000);
	__asm__ volatile("sti" ::: "memory");
	while (virtq_used_idx(&txq) == txq.last_used && rdtsc() < end)
		cpu_relax();
	cli();
	bool ok = virtq_used_idx(&txq) != txq.last_used;
	txq.last_used = txq.used.idx;
	return ok;
}

/* Gives receive buffer `id` back to the device. */
static void rx_done(u16 id)
{
	virtq_post(&rxq, id);
	notify(&rxq);
}

static u8 *eth(u8 *f, const u8 *dst, u16 type)
{
	memcpy(f, dst, 6);
	memcpy(f + 6, mac, 6);
	put16(f + 12, type);
	return f + 14;
}

static void send_arp(u16 op, const u8 *tha, u32 tpa)
{
	u8 *a = eth(txframe, op == 1 ? broadcast : tha, 0x0806);
	put16(a, 1);
	put16(a + 2, 0x0800);
	a[4] = 6;
	a[5] = 4;
	put16(a + 6, op);
	memcpy(a + 8, mac, 6);
	put32(a + 14, my_ip);
	memcpy(a + 18, op == 1 ? (const u8 *)"\0\0\0\0\0\0" : tha, 6);
	put32(a + 24, tpa);
	vnet_send(14 + 28);
}

/* An IPv4 header for `payload` bytes of protocol `proto`, checksum filled in. */
static u8 *ipv4(u8 *p, u8 proto, u32 src, u32 dst, u32 payload)
{
	memset(p, 0, 20);
	p[0] = 0x45;
	put16(p + 2, (u16)(20 + payload));
	put16(p + 4, 0x1234);
	p[8] = 64;
	p[9] = proto;
	put32(p + 12, src);
	put32(p + 16, dst);
	put16(p + 10, fold(sum16(p, 20, 0)));
	return p + 20;
}

/* The TCP checksum's sum over the pseudo-header and `len` bytes of segment at `t` (not folded). */
static u32 tcp_sum(u32 src, u32 dst, const u8 *t, u32 len)
{
	u8 pseudo[12];
	put32(pseudo, src);
	put32(pseudo + 4, dst);
	pseudo[8] = 0;
	pseudo[9] = 6;
	put16(pseudo + 10, (u16)len);
	return sum16(t, len, sum16(pseudo, 12, 0));
}

/* A TCP segment carrying `data_len` bytes of `data` (options: MSS on a SYN); checksum over the pseudo-header. */
static void send_tcp_data(u32 dst, u16 sport, u16 dport, u32 seq, u32 ack, u8 flags, const u8 *data, u32 data_len)
{
	u32 opt = (flags & 0x02) ? 4 : 0, hlen = 20 + opt, len = hlen + data_len;
	u8 *t = ipv4(eth(txframe, gw_mac, 0x0800), 6, my_ip, dst, len);
	memset(t, 0, hlen);
	put16(t, sport);
	put16(t + 2, dport);
	put32(t + 4, seq);
	put32(t + 8, ack);
	t[12] = (u8)((hlen / 4) << 4);
	t[13] = flags;
	put16(t + 14, 64240);
	if (opt) {
		t[20] = 2;
		t[21] = 4;
		put16(t + 22, 1460);
	}
	if (data_len)
		memcpy(t + hlen, data, data_len);
	put16(t + 16, fold(tcp_sum(my_ip, dst, t, len)));
	vnet_send(14 + 20 + len);
}

/* A TCP segment with no data (options: MSS on a SYN); checksum over the pseudo-header. */
static void send_tcp(u32 dst, u16 sport, u16 dport, u32 seq, u32 ack, u8 flags)
{
	u32 opt = (flags & 0x02) ? 4 : 0, len = 20 + opt;
	u8 *t = ipv4(eth(txframe, gw_mac, 0x0800), 6, my_ip, dst, len);
	memset(t, 0, len);
	put16(t, sport);
	put16(t + 2, dport);
	put32(t + 4, seq);
	put32(t + 8, ack);
	t[12] = (u8)((len / 4) << 4);
	t[13] = flags;
	put16(t + 14, 64240);
	if (opt) {
		t[20] = 2;
		t[21] = 4;
		put16(t + 22, 1460);
	}
	u8 pseudo[12];
	put32(pseudo, my_ip);
	put32(pseudo + 4, dst);
	pseudo[8] = 0;
	pseudo[9] = 6;
	put16(pseudo + 10, (u16)len);
	put16(t + 16, fold(sum16(t, len, sum16(pseudo, 12, 0))));
	vnet_send(14 + 20 + len);
}

/*
 * Waits (until `end`) for a frame `want` accepts, answering ARP requests for our address meanwhile.
 * `want` sees the frame (Ethernet header on) and returns true to stop.
 */
static bool receive_until(u64 end, bool (*want)(const u8 *f, u32 len))
{
	for (;;) {
		__asm__ volatile("sti" ::: "memory");
		while (virtq_used_idx(&rxq) == rxq.last_used && rdtsc() < end)
			cpu_relax();
		cli();
		if (virtq_used_idx(&rxq) == rxq.last_used)
			return false;
		u32 slot = rxq.last_used % QS;
		u16 id = (u16)rxq.used.ring[slot].id;
		u32 len = rxq.used.ring[slot].len;
		rxq.last_used++;
		if (id >= QS || len < HDR + 14 || len > RXBUF) {
			rx_done(id < QS ? id : 0);
			continue;
		}
		const u8 *f = rxbuf[id] + HDR;
		u32 n = len - HDR;
		bool stop = false;
		if (get16(f + 12) == 0x0806 && n >= 42 && get16(f + 20) == 1 && my_ip && get32(f + 38) == my_ip) {
			u8 sha[6];
			memcpy(sha, f + 22, 6);
			u32 spa = get32(f + 28);
			rx_done(id);
			send_arp(2, sha, spa);
			continue;
		}
		stop = want(f, n);
		rx_done(id);
		if (stop)
			return true;
	}
}

/* ---- DHCP ---- */
#define DHCP_XID 0x756e6831u   /* "unh1" */
static u32 offer_yiaddr, offer_router, offer_dns, offer_mask, offer_server;

static void send_discover(void)
{
	const u32 bootp = 236 + 4 + 3 + 5 + 1 + 51;   /* fixed part, magic, options, padding to 300 */
	u8 *u = ipv4(eth(txframe, broadcast, 0x0800), 17, 0, 0xFFFFFFFFu, 8 + bootp);
	put16(u, 68);
	put16(u + 2, 67);
	put16(u + 4, (u16)(8 + bootp));
	put16(u + 6, 0);   /* no UDP checksum (IPv4 allows it) */
	u8 *b = u + 8;
	memset(b, 0, bootp);
	b[0] = 1;   /* BOOTREQUEST */
	b[1] = 1;
	b[2] = 6;
	put32(b + 4, DHCP_XID);
	put16(b + 10, 0x8000);   /* broadcast */
	memcpy(b + 28, mac, 6);
	put32(b + 236, 0x63825363u);
	u8 *o = b + 240;
	*o++ = 53, *o++ = 1, *o++ = 1;                         /* DHCPDISCOVER */
	*o++ = 55, *o++ = 3, *o++ = 1, *o++ = 3, *o++ = 6;     /* ask for mask, router, DNS */
	*o++ = 255;
	vnet_send(14 + 20 + 8 + bootp);
}

static bool is_offer(const u8 *f, u32 n)
{
	if (n < 14 + 20 + 8 + 240 || get16(f + 12) != 0x0800 || f[14 + 9] != 17)
		return false;
	const u8 *ip = f + 14;
	u32 ihl = (ip[0] & 15) * 4;
	const u8 *udp = ip + ihl, *b = udp + 8, *end = f + n;
	if (b + 240 > end || get16(udp + 2) != 68 || b[0] != 2 || get32(b + 4) != DHCP_XID || get32(b + 236) != 0x63825363u)
		return false;
	u32 type = 0;
	for (const u8 *o = b + 240; o < end && *o != 255;) {
		if (*o == 0) {
			o++;
			continue;
		}
		if (o + 2 > end || o + 2 + o[1] > end)
			break;
		u8 code = o[0], l = o[1];
		const u8 *v = o + 2;
		if (code == 53 && l >= 1)
			type = v[0];
		else if (code == 1 && l >= 4)
			offer_mask = get32(v);
		else if (code == 3 && l >= 4)
			offer_router = get32(v);
		else if (code == 6 && l >= 4)
			offer_dns = get32(v);
		else if (code == 54 && l >= 4)
			offer_server = get32(v);
		o += 2 + l;
	}
	if (type != 2)
		return false;
	offer_yiaddr = get32(b + 16);
	memcpy(gw_mac, f + 6, 6);
	return true;
}

static void ip_text(char *out, u32 a)
{
	fmt(out, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

/* DISCOVER, up to three tries, and the OFFER's fields reported; our address is then the offered one. */
static void dhcp(const char *scenario)
{
	bool got = false;
	u64 t0 = rdtsc();
	for (u32 i = 0; i < 3 && !got; i++) {
		send_discover();
		got = receive_until(slow_host_deadline_us(1000000), is_offer);
	}
	if (!got)
		fail(scenario, 10, "no DHCPOFFER");
	u64 us = (rdtsc() - t0) * 1000 / tsc_khz;
	my_ip = offer_yiaddr;
	char a[16], r[16], d[16];
	ip_text(a, offer_yiaddr);
	ip_text(r, offer_router);
	ip_text(d, offer_dns);
	con_printf("dhcp offer %s router %s dns %s\n", a, r, d);
	event("net_dhcp ok=1 yiaddr=%u router=%u dns=%u mask=%u server=%u us=%lu", offer_yiaddr, offer_router, offer_dns,
	      offer_mask, offer_server, us);
}

/* ---- ARP for the gateway ---- */
static u32 arp_target;
static bool is_arp_reply(const u8 *f, u32 n)
{
	if (n < 42 || get16(f + 12) != 0x0806 || get16(f + 20) != 2 || get32(f + 28) != arp_target)
		return false;
	memcpy(gw_mac, f + 22, 6);
	return true;
}

/* ---- TCP ---- */
static u16 tcp_port, tcp_peer_port;
static u32 tcp_seq, tcp_peer_seq, tcp_peer;
static u8 tcp_flags;
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_ACK 0x10

/* A TCP segment to us on tcp_port (from tcp_peer:tcp_peer_port when that is set). */
static bool is_tcp_for_us(const u8 *f, u32 n)
{
	if (n < 14 + 20 + 20 || get16(f + 12) != 0x0800 || f[14 + 9] != 6 || get32(f + 14 + 16) != my_ip)
		return false;
	const u8 *t = f + 14 + (f[14] & 15) * 4;
	if (t + 20 > f + n || get16(t + 2) != tcp_port || (tcp_peer_port && get16(t) != tcp_peer_port))
		return false;
	tcp_peer = get32(f + 14 + 12);
	memcpy(gw_mac, f + 6, 6);   /* where an answer goes */
	tcp_peer_port = get16(t);
	tcp_peer_seq = get32(t + 4);
	tcp_flags = t[13];
	return (tcp_flags & (TCP_RST | TCP_SYN)) != 0;   /* an answer to a SYN, or a SYN */
}

/* A dotted IPv4 address from the command line (host byte order), 0 when absent or malformed. */
static u32 ip_arg(const char *key)
{
	char s[16];
	if (!cmdline_get(key, s, sizeof s))
		return 0;
	u32 a = 0, part = 0, dots = 0, digits = 0;
	for (const char *p = s;; p++) {
		if (*p >= '0' && *p <= '9') {
			part = part * 10 + (u32)(*p - '0');
			if (part > 255 || ++digits > 3)
				return 0;
		} else if ((*p == '.' || *p == 0) && digits) {
			a = a << 8 | part;
			part = digits = 0;
			if (*p == 0)
				return dots == 3 ? a : 0;
			dots++;
		} else
			return 0;
	}
}

static u16 port_arg(const char *scenario)
{
	u64 p = cmdline_u64("port", 0);
	if (p == 0 || p > 65535)
		fail(scenario, 11, "port= missing or not 1-65535");
	return (u16)p;
}

/* The gateway's MAC into gw_mac (arp_target = the router): three tries, or the scenario fails. */
static void arp_gateway(const char *scenario)
{
	arp_target = offer_router;
	bool arp = false;
	for (u32 i = 0; i < 3 && !arp; i++) {
		send_arp(1, 0, arp_target);
		arp = receive_until(slow_host_deadline_us(1000000), is_arp_reply);
	}
	if (!arp)
		fail(scenario, 12, "no ARP reply from the gateway");
}

/* rounds= (1-1000000, else 1000) and bytes= (4-1400, else 32) of the request-response scenarios. */
static void rr_args(u32 *rounds, u32 *bytes)
{
	*rounds = (u32)cmdline_u64("rounds", 1000);
	*bytes = (u32)cmdline_u64("bytes", 32);
	if (*bytes < 4 || *bytes > 1400)
		*bytes = 32;
	if (*rounds == 0 || *rounds > 1000000)
		*rounds = 1000;
}

/* ---- UDP request-response ---- */
#define RR_SPORT 40999
#define RR_MAX_SAMPLES 4096
static u32 rr_buf[RR_MAX_SAMPLES];
static u16 rr_port;
static u32 rr_seq;

static void send_udp(u16 dport, u32 seq, u32 bytes)
{
	u8 *u = ipv4(eth(txframe, gw_mac, 0x0800), 17, my_ip, offer_router, 8 + bytes);
	put16(u, RR_SPORT);
	put16(u + 2, dport);
	put16(u + 4, (u16)(8 + bytes));
	put16(u + 6, 0);
	memset(u + 8, 0x5a, bytes);
	put32(u + 8, seq);
	vnet_send(14 + 20 + 8 + bytes);
}

static bool is_echo(const u8 *f, u32 n)
{
	if (n < 14 + 20 + 8 + 4 || get16(f + 12) != 0x0800 || f[14 + 9] != 17 || get32(f + 14 + 16) != my_ip)
		return false;
	const u8 *u = f + 14 + (f[14] & 15) * 4;
	if (u + 12 > f + n || get16(u) != rr_port || get16(u + 2) != RR_SPORT)
		return false;
	return get32(u + 8) == rr_seq;
}

static NORETURN void udp_rr(const char *ev)
{
	rr_port = port_arg(ev);
	u32 rounds, bytes;
	rr_args(&rounds, &bytes);
	arp_gateway(ev);
	struct samples rr;
	samples_init(&rr, rr_buf, RR_MAX_SAMPLES);
	u32 lost = 0;
	u64 t_all = rdtsc();
	for (u32 r = 0; r < rounds; r++) {
		rr_seq = r + 1;
		u64 t0 = rdtsc();
		send_udp(rr_port, rr_seq, bytes);
		if (receive_until(slow_host_deadline_us(1000000), is_echo))
			samples_add(&rr, rdtsc() - t0);
		else
			lost++;
	}
	u64 us = (rdtsc() - t_all) * 1000 / tsc_khz;
	struct summary sm;
	samples_summarize(&rr, &sm);
	con_printf("udp rr %u rounds of %u bytes: p50 %lu ns, p99 %lu ns, %u lost\n", rounds, bytes, sm.p50_ns, sm.p99_ns, lost);
	event("net_udp_rr ok=%u port=%u rounds=%u bytes=%u lost=%u p50_ns=%lu p99_ns=%lu min_ns=%lu mean_ns=%lu us=%lu", lost < rounds,
	      rr_port, rounds, bytes, lost, sm.p50_ns, sm.p99_ns, sm.min_ns, sm.mean_ns, us);
	power_off();
}

/* ---- TCP request-response: one connection, `rounds` requests of `bytes`, each echoed ---- */
/*
 * A client with just enough TCP for an echo on a loss-free link (libslirp's loopback or a tap):
 * the three-way handshake, then per round one segment of `bytes` (PSH|ACK; a round number in its
 * first 4 bytes, 0x5a after) whose echo is collected in order — in however many segments it
 * comes — checked byte for byte and ACKed; then FIN both ways. Sequence and acknowledgement
 * numbers are tracked (snd_nxt/snd_una, rcv_nxt); nothing is retransmitted: a segment out of
 * order, a bad checksum, a wrong echo or a wait past the deadline is counted and reported
 * (`@u1 net_tcp_rr ok=0 stage=N`), never waited out.
 */
#define TRR_SPORT 41999
#define F_FIN 0x01
#define F_PSH 0x08
static u32 trr_snd_nxt, trr_snd_una, trr_rcv_nxt, trr_peer_wnd;
static u32 trr_got, trr_want, trr_bytes, trr_ooo, trr_bad_sum, trr_dup, trr_mismatch;
static bool trr_peer_fin, trr_rst, trr_synack;
static u8 trr_req[1400], trr_echo[1400];

/* Sequence-space comparison: a before b (mod 2^32). */
static bool seq_lt(u32 a, u32 b) { return (int)(a - b) < 0; }

/*
 * Takes one segment of our connection (from the gateway's `rr_port` to TRR_SPORT): acknowledgement,
 * in-order data into trr_echo, FIN, RST. True when the waiting round is complete: the SYN-ACK in the
 * handshake, the whole echo (trr_got == trr_want), the peer's FIN, or a RST.
 */
static bool take_tcp_segment(const u8 *f, u32 n)
{
	if (n < 14 + 20 + 20 || get16(f + 12) != 0x0800 || f[14 + 9] != 6 || get32(f + 14 + 16) != my_ip)
		return false;
	const u8 *ip = f + 14;
	u32 ihl = (ip[0] & 15) * 4, tot = get16(ip + 2);
	if (ihl < 20 || tot < ihl + 20 || 14 + tot > n)
		return false;
	const u8 *t = ip + ihl;
	u32 seglen = tot - ihl, thl = (u32)(t[12] >> 4) * 4;
	if (get16(t) != rr_port || get16(t + 2) != TRR_SPORT || thl < 20 || thl > seglen)
		return false;
	if (fold(tcp_sum(get32(ip + 12), my_ip, t, seglen)) != 0) {
		trr_bad_sum++;
		return false;
	}
	u8 flags = t[13];
	u32 seq = get32(t + 4), ack = get32(t + 8), dlen = seglen - thl;
	if (flags & TCP_RST) {
		trr_rst = true;
		return true;
	}
	if (!trr_synack) {
		if ((flags & (TCP_SYN | TCP_ACK)) != (TCP_SYN | TCP_ACK) || ack != trr_snd_nxt)
			return false;
		trr_synack = true;
		trr_rcv_nxt = seq + 1;
		trr_snd_una = ack;
		trr_peer_wnd = get16(t + 14);
		return true;
	}
	if ((flags & TCP_ACK) && seq_lt(trr_snd_una, ack) && !seq_lt(trr_snd_nxt, ack))
		trr_snd_una = ack;
	trr_peer_wnd = get16(t + 14);
	if (dlen) {
		if (seq != trr_rcv_nxt) {
			/* Before rcv_nxt: a copy of what we have (our ACK was late); after it: a gap — lost data. */
			if (seq_lt(seq, trr_rcv_nxt))
				trr_dup++;
			else
				trr_ooo++;
			return false;
		}
		u32 room = trr_want - trr_got, take = dlen < room ? dlen : room;
		memcpy(trr_echo + trr_got, t + thl, take);
		trr_got += take;
		trr_rcv_nxt += take;
		if (take < dlen)
			trr_mismatch++;   /* more than was asked for: not an echo of this round */
	}
	if ((flags & F_FIN) && seq + dlen == trr_rcv_nxt) {
		trr_rcv_nxt++;
		trr_peer_fin = true;
		return true;
	}
	return trr_want && trr_got == trr_want;
}

static NORETURN void tcp_rr_report(const char *ev, u32 ok, u32 stage, u32 rounds, u32 done, struct samples *rr, u32 fin,
                                   u64 handshake_us, u64 us)
{
	struct summary sm = { 0 };
	if (rr->count)
		samples_summarize(rr, &sm);
	con_printf("tcp rr %u of %u rounds of %u bytes: p50 %lu ns, p99 %lu ns, %u out of order, %u bad checksums%s\n", done, rounds,
	           trr_bytes, sm.p50_ns, sm.p99_ns, trr_ooo, trr_bad_sum, ok ? "" : " (FAILED)");
	event("%s ok=%u stage=%u port=%u rounds=%u done=%u bytes=%u ooo=%u dup=%u bad_sum=%u mismatch=%u fin=%u rst=%u "
	      "handshake_us=%lu p50_ns=%lu p99_ns=%lu min_ns=%lu mean_ns=%lu us=%lu",
	      ev, ok, stage, rr_port, rounds, done, trr_bytes, trr_ooo, trr_dup, trr_bad_sum, trr_mismatch, fin, trr_rst, handshake_us,
	      sm.p50_ns, sm.p99_ns, sm.min_ns, sm.mean_ns, us);
	power_off();
}

static NORETURN void tcp_rr(const char *ev)
{
	rr_port = port_arg(ev);
	u32 rounds;
	rr_args(&rounds, &trr_bytes);
	arp_gateway(ev);
	struct samples rr;
	samples_init(&rr, rr_buf, RR_MAX_SAMPLES);
	u32 dst = offer_router;
	u32 iss = (u32)rdtsc();
	trr_snd_nxt = iss + 1;   /* the SYN takes one */
	trr_snd_una = iss;
	u64 t_all = rdtsc();
	send_tcp(dst, TRR_SPORT, rr_port, iss, 0, TCP_SYN);
	/* libslirp answers the SYN once its own connect() to the host's port is done. */
	bool got = receive_until(slow_host_deadline_us(5000000), take_tcp_segment);
	u64 handshake_us = (rdtsc() - t_all) * 1000 / tsc_khz;
	if (!got || trr_rst || !trr_synack)
		tcp_rr_report(ev, 0, 13, rounds, 0, &rr, 0, handshake_us, handshake_us);
	send_tcp(dst, TRR_SPORT, rr_port, trr_snd_nxt, trr_rcv_nxt, TCP_ACK);

	u32 done = 0, stage = 0;
	for (u32 r = 0; r < rounds; r++) {
		memset(trr_req, 0x5a, trr_bytes);
		put32(trr_req, r + 1);
		trr_got = 0;
		trr_want = trr_bytes;
		u64 t0 = rdtsc();
		send_tcp_data(dst, TRR_SPORT, rr_port, trr_snd_nxt, trr_rcv_nxt, TCP_ACK | F_PSH, trr_req, trr_bytes);
		trr_snd_nxt += trr_bytes;
		bool back = receive_until(slow_host_deadline_us(1000000), take_tcp_segment);
		u64 dt = rdtsc() - t0;
		if (trr_rst || trr_peer_fin) {
			stage = 15;   /* the peer reset or closed the connection mid-exchange */
			break;
		}
		if (!back) {
			stage = 14;   /* no (whole) echo before the deadline: lost, and nothing retransmits it */
			break;
		}
		if (memcmp(trr_echo, trr_req, trr_bytes) || trr_mismatch) {
			stage = 16;   /* what came back is not what was sent */
			break;
		}
		samples_add(&rr, dt);
		done++;
		send_tcp(dst, TRR_SPORT, rr_port, trr_snd_nxt, trr_rcv_nxt, TCP_ACK);
	}
	if (stage) {
		send_tcp(dst, TRR_SPORT, rr_port, trr_snd_nxt, trr_rcv_nxt, TCP_RST | TCP_ACK);
		tcp_rr_report(ev, 0, stage, rounds, done, &rr, 0, handshake_us, (rdtsc() - t_all) * 1000 / tsc_khz);
	}
	/* Close: our FIN (acknowledged: snd_una reaches snd_nxt), the peer's FIN (an echo server ends when we do), our last ACK. */
	send_tcp(dst, TRR_SPORT, rr_port, trr_snd_nxt, trr_rcv_nxt, TCP_ACK | F_FIN);
	trr_snd_nxt++;
	trr_want = trr_got = 0;   /* data now would be more than was echoed: counted as a mismatch */
	u64 end = slow_host_deadline_us(2000000);
	while (!trr_peer_fin && !trr_rst && receive_until(end, take_tcp_segment))
		;
	u32 fin = trr_peer_fin && trr_snd_una == trr_snd_nxt;
	if (trr_peer_fin)
		send_tcp(dst, TRR_SPORT, rr_port, trr_snd_nxt, trr_rcv_nxt, TCP_ACK);
	u64 us = (rdtsc() - t_all) * 1000 / tsc_khz;
	bool clean = fin && !trr_ooo && !trr_bad_sum && !trr_mismatch;
	tcp_rr_report(ev, clean, !fin ? 17 : clean ? 0 : 18, rounds, done, &rr, fin, handshake_us, us);
}

NORETURN void scenario_net(const char *name)
{
	const char *ev = !memcmp(name, "net-dhcp", 9) ? "net_dhcp" : !memcmp(name, "net-connect", 12) ? "net_connect"
	               : !memcmp(name, "net-udp-rr", 11) ? "net_udp_rr" : !memcmp(name, "net-tcp-rr", 11) ? "net_tcp_rr" : "net_listen";
	u32 stage = vnet_init();
	if (stage)
		fail(ev, stage, "device set-up");
	my_ip = 0;
	u32 static_ip = ip_arg("ip"), static_gw = ip_arg("gw");
	if (static_ip && static_gw && memcmp(name, "net-dhcp", 9)) {
		my_ip = static_ip;
		offer_router = static_gw;
		event("net_static ip=%u gw=%u", my_ip, offer_router);
	} else {
		dhcp(ev);
	}
	if (!memcmp(name, "net-dhcp", 9))
		power_off();
	if (!memcmp(name, "net-udp-rr", 11))
		udp_rr(ev);
	if (!memcmp(name, "net-tcp-rr", 11))
		tcp_rr(ev);

	if (!memcmp(name, "net-connect", 12)) {
		u16 port = port_arg(ev);
		arp_gateway(ev);
		event("net_arp ip=%u mac=%lu", arp_target, mac48(gw_mac));
		tcp_port = 40000 + (u16)(rdtsc() & 0x3FF);
		tcp_peer_port = port;
		tcp_seq = (u32)rdtsc();
		u64 t0 = rdtsc();
		send_tcp(offer_router, tcp_port, port, tcp_seq, 0, TCP_SYN);
		/* libslirp answers once its own connect() to the host port has finished (or failed). */
		bool got = receive_until(slow_host_deadline_us(5000000), is_tcp_for_us);
		u64 us = (rdtsc() - t0) * 1000 / tsc_khz;
		u32 syn_ack = got && (tcp_flags & (TCP_SYN | TCP_ACK)) == (TCP_SYN | TCP_ACK);
		u32 rst = got && (tcp_flags & TCP_RST);
		if (syn_ack) {
			/* Finish the handshake, then abort it: the host's server sees a connection and its end. */
			send_tcp(offer_router, tcp_port, port, tcp_seq + 1, tcp_peer_seq + 1, TCP_ACK);
			send_tcp(offer_router, tcp_port, port, tcp_seq + 1, tcp_peer_seq + 1, TCP_RST | TCP_ACK);
		}
		char gw[16];
		ip_text(gw, offer_router);
		con_printf("tcp %s:%u -> %s\n", gw, port, syn_ack ? "SYN-ACK" : rst ? "RST" : "no answer");
		event("net_connect port=%u syn_ack=%u rst=%u us=%lu", port, syn_ack, rst, us);
		power_off();
	}

	/* net-listen: a host port forward reaching the guest arrives as a SYN to our port. */
	u16 port = port_arg(ev);
	u64 wait_ms = cmdline_u64("wait_ms", 30000);
	tcp_port = port;
	tcp_peer_port = 0;
	event("net_listen port=%u ip=%u", port, my_ip);
	con_printf("listening on %u\n", port);
	bool got = receive_until(tsc_deadline_us(wait_ms * 1000), is_tcp_for_us);
	u32 syn = got && (tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN;
	if (syn) {
		/* Refuse it (RST, ACK): the guest has no stack; what counts is that the SYN arrived. */
		send_tcp(tcp_peer, port, tcp_peer_port, 0, tcp_peer_seq + 1, TCP_RST | TCP_ACK);
	}
	con_printf("tcp SYN on %u: %s\n", port, syn ? "yes" : "none");
	event("net_syn port=%u syn=%u src=%u src_port=%u", port, syn, syn ? tcp_peer : 0, syn ? tcp_peer_port : 0);
	power_off();
}
