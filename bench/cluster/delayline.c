/* dbemu-delay: the delay line of one emulated host (bench/cluster/delay.py builds and runs it).
 *
 *   dbemu-delay QUEUE DELAY_NS STATE_FILE
 *   dbemu-delay QUEUE check            binds the queue as below, then exits 0 (the support check)
 *
 * Binds NFQUEUE queue QUEUE in the calling network namespace through libnetfilter_queue and holds every packet
 * the kernel queues there for DELAY_NS nanoseconds, then accepts it. The packet never leaves the kernel: the queue is bound in NFQNL_COPY_META mode (no payload
 * is copied) with NFQA_CFG_F_GSO (a GSO super-packet is queued whole, not segmented), so the cost is one small
 * netlink message per (super-)packet in and one batch verdict per release. Every packet waits the same time, so
 * packets leave in the order they came: one nfq_set_verdict_batch(id of the last packet due) releases all of them.
 * A notification lost to a full socket buffer (ENOBUFS) costs nothing but lateness: that packet goes with the next
 * batch.
 *
 * Fail closed: the iptables rule that feeds the queue has no --queue-bypass, so while no process is bound (this one
 * not started yet, or dead) the kernel drops the host's ingress instead of passing it undelayed. A full queue drops
 * too (no NFQA_CFG_F_FAIL_OPEN).
 *
 * Timing. A packet's delay counts from the kernel's timestamp of it (NFQA_TIMESTAMP: its arrival on the host's
 * interface, or its queueing), not from when this process gets to read it: the process holds a socket with
 * SO_TIMESTAMPNS, which makes the kernel stamp received packets while it lives (net_enable_timestamp; one clock read
 * per packet, machine-wide, undone when the socket closes). So notifications need not be read at once: while
 * packets are held, the process sleeps until the next release and reads what came meanwhile then (one wake-up per
 * release, none per arrival). A release is aimed early by the median wake-up lateness this process has seen
 * (tracked in 1 us steps; at most 200 us and half the delay), and every packet due before the expected wake-up goes
 * with that batch, so the release error centres on zero instead of adding the timer's lateness to every packet. It
 * runs SCHED_FIFO (priority 1) where it may, so that CPU-bound processes of the hosts do not delay its wake-ups.
 *
 * STATE_FILE is written (atomically) once bound ("pid" first: the starter waits for it) and then once a second:
 * packets released, batches, ENOBUFS events, the largest backlog, packets without a kernel timestamp, and the release
 * error (p50/p99 over the last second and in all, and the largest: microseconds after the due time, negative: before).
 *
 * Hand-written parts: the ring of (packet id, due time) and the timed loop; everything netfilter is the library's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RING (1u << 18)          /* packets held at once; the kernel queue's maxlen is kept below it */
#define QUEUE_MAXLEN (RING - 1024)
#define RCVBUF (16 << 20)
#define LATE_BINS 8192           /* release-error histogram: 1 us bins from -EARLY_BINS us to 8 ms, the ends hold the rest */
#define EARLY_BINS 1024
#define AIM_MAX_NS 200000        /* releases are aimed at most this early */

struct held { uint32_t id; int64_t due; };

static struct held ring[RING];
static uint32_t head, tail;      /* ring[head..tail) are held, oldest first */
static int64_t delay_ns;
static volatile sig_atomic_t stop;
static uint64_t packets, batches, enobufs, backlog_max, unstamped;
static int64_t late_max_ns, real_minus_mono, aim_ns = 20000;
static uint64_t late_now[LATE_BINS], late_all[LATE_BINS];

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data) {
    (void)qh; (void)msg;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (ph == NULL || tail - head >= RING) return 0;  /* cannot happen: maxlen < RING; a skipped id goes with the next batch */
    int64_t read_at = *(int64_t *)data, arrived = read_at;
    struct timeval tv;
    if (nfq_get_timestamp(nfa, &tv) == 0) {  /* the kernel's stamp, CLOCK_REALTIME, microseconds */
        int64_t k = (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000 - real_minus_mono;
        if (k <= read_at + 1000 && read_at - k < 1000000000) arrived = k < read_at ? k : read_at;
        else unstamped++;
    } else {
        unstamped++;
    }
    if (tail != head && arrived < ring[(tail - 1) % RING].due - delay_ns) arrived = ring[(tail - 1) % RING].due - delay_ns;
    ring[tail % RING] = (struct held){ntohl(ph->packet_id), arrived + delay_ns};
    tail++;
    if (tail - head > backlog_max) backlog_max = tail - head;
    return 0;
}

static int64_t quantile(const uint64_t *bins, uint64_t n, double q) {
    if (n == 0) return 0;
    uint64_t want = (uint64_t)(q * (double)(n - 1)) + 1, seen = 0;
    for (int i = 0; i < LATE_BINS; i++) {
        seen += bins[i];
        if (seen >= want) return (int64_t)i - EARLY_BINS;
    }
    return LATE_BINS - 1 - EARLY_BINS;
}

static const char *sched = "other";

static void write_state(const char *path, int queue) {
    uint64_t n_now = 0, n_all = 0;
    for (int i = 0; i < LATE_BINS; i++) { n_now += late_now[i]; n_all += late_all[i]; }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL) return;
    fprintf(f, "{\"pid\": %d, \"queue\": %d, \"delay_ns\": %" PRId64 ", \"packets\": %" PRIu64 ", \"batches\": %" PRIu64
               ", \"enobufs\": %" PRIu64 ", \"backlog_max\": %" PRIu64 ", \"held\": %u, \"late_us\": {\"last_s\": "
               "{\"p50\": %" PRId64 ", \"p99\": %" PRId64 ", \"n\": %" PRIu64 "}, \"all\": {\"p50\": %" PRId64
               ", \"p99\": %" PRId64 ", \"n\": %" PRIu64 "}, \"max\": %" PRId64 "}, \"aim_us\": %" PRId64
               ", \"unstamped\": %" PRIu64 ", \"sched\": \"%s\"}\n",
            (int)getpid(), queue, delay_ns, packets, batches, enobufs, backlog_max, tail - head,
            quantile(late_now, n_now, 0.5), quantile(late_now, n_now, 0.99), n_now,
            quantile(late_all, n_all, 0.5), quantile(late_all, n_all, 0.99), n_all, late_max_ns / 1000, aim_ns / 1000,
            unstamped, sched);
    fclose(f);
    rename(tmp, path);
    memset(late_now, 0, sizeof late_now);
}

static void on_signal(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv) {
    int check = argc == 3 && strcmp(argv[2], "check") == 0;
    if (argc != 4 && !check) {
        fprintf(stderr, "usage: %s QUEUE DELAY_NS STATE_FILE | %s QUEUE check\n", argv[0], argv[0]);
        return 2;
    }
    int queue = atoi(argv[1]);
    delay_ns = check ? 0 : strtoll(argv[2], NULL, 10);
    const char *state = check ? NULL : argv[3];
    if (queue < 0 || queue > 65535 || delay_ns < 0) {
        fprintf(stderr, "dbemu-delay: bad queue %s or delay %s\n", argv[1], argv[2]);
        return 2;
    }
    prctl(PR_SET_TIMERSLACK, 1UL);  /* wake at the aimed time, not up to 50 us after it */
    struct sched_param sp = {.sched_priority = 1};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0) sched = "fifo";
    int stamp_sock = socket(AF_INET, SOCK_DGRAM, 0), on = 1;  /* kept open: the kernel stamps received packets */
    if (stamp_sock < 0 || setsockopt(stamp_sock, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) < 0) {
        perror("dbemu-delay: SO_TIMESTAMPNS");
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);

    int64_t arrived = 0;
    struct nfq_handle *h = nfq_open();
    if (h == NULL) { perror("dbemu-delay: nfq_open"); return 1; }
    struct nfq_q_handle *qh = nfq_create_queue(h, (uint16_t)queue, on_packet, &arrived);
    if (qh == NULL) { perror("dbemu-delay: nfq_create_queue (is the queue bound by another process?)"); return 1; }
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) { perror("dbemu-delay: nfq_set_mode"); return 1; }
    if (nfq_set_queue_flags(qh, NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_GSO) < 0) {
        perror("dbemu-delay: nfq_set_queue_flags(GSO)");
        return 1;
    }
    if (nfq_set_queue_maxlen(qh, QUEUE_MAXLEN) < 0) { perror("dbemu-delay: nfq_set_queue_maxlen"); return 1; }
    nfnl_rcvbufsiz(nfq_nfnlh(h), RCVBUF);
    if (check) return 0;
    int fd = nfq_fd(h);
    write_state(state, queue);

    static char buf[1 << 16];
    int64_t next_state = now_ns() + 1000000000;
    int64_t aim_max = delay_ns / 2 < AIM_MAX_NS ? delay_ns / 2 : AIM_MAX_NS;  /* never more than half the delay early */
    if (aim_ns > aim_max) aim_ns = aim_max;
    while (!stop) {
        int64_t now = now_ns();
        /* read what came, then release, with one verdict, every packet due before the next wake-up could come */
        if (head != tail && ring[head % RING].due <= now + aim_ns) {
            uint32_t last = head;
            while (last + 1 != tail && ring[(last + 1) % RING].due <= now + aim_ns) last++;
            for (uint32_t k = head; k != last + 1; k++) {
                int64_t err = now - ring[k % RING].due;
                if (err > late_max_ns) late_max_ns = err;
                int64_t bin = err / 1000 + EARLY_BINS;
                bin = bin < 0 ? 0 : bin >= LATE_BINS ? LATE_BINS - 1 : bin;
                late_now[bin]++;
                late_all[bin]++;
            }
            if (nfq_set_verdict_batch(qh, ring[last % RING].id, NF_ACCEPT) < 0 && errno != ENOBUFS) {
                perror("dbemu-delay: nfq_set_verdict_batch");
                return 1;
            }
            packets += last + 1 - head;
            batches++;
            head = last + 1;
        }
        if (now >= next_state) {
            write_state(state, queue);
            next_state = now + 1000000000;
        }
        int64_t wake = next_state;
        if (head != tail && ring[head % RING].due - aim_ns < wake) wake = ring[head % RING].due - aim_ns;
        int64_t wait = wake - now < 0 ? 0 : wake - now;
        struct timespec ts = {wait / 1000000000, wait % 1000000000};
        /* while packets are held, the next release wakes this process, and the notifications that came meanwhile
         * are read then (their delay counts from the kernel's stamp, not from the read): one wake-up per release,
         * not one more per arrival; an empty line waits for the next arrival */
        struct pollfd pfd = {fd, POLLIN, 0};
        int r = ppoll(&pfd, head == tail ? 1 : 0, &ts, NULL);
        if (r < 0) {
            if (errno == EINTR) continue;
            perror("dbemu-delay: ppoll");
            return 1;
        }
        if (r == 0 && wait > 0) {  /* a timer wake-up: track the median of its lateness (1 us steps) */
            aim_ns += now_ns() - wake > aim_ns ? 1000 : -1000;
            aim_ns = aim_ns < 0 ? 0 : aim_ns > aim_max ? aim_max : aim_ns;
        }
        real_minus_mono = real_ns() - now_ns();
        for (;;) {  /* every notification waiting now */
            ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n < 0) {
                if (errno == ENOBUFS) { enobufs++; continue; }
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
                perror("dbemu-delay: recv");
                return 1;
            }
            arrived = now_ns();
            nfq_handle_packet(h, buf, (int)n);
        }
    }
    write_state(state, queue);
    nfq_destroy_queue(qh);  /* the kernel drops what is still held */
    nfq_close(h);
    return 0;
}
