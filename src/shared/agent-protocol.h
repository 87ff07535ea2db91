/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The wire protocol between hutch (the host) and hutch-agent (PID 1 of a
 * microVM guest, src/guest/agent.c), over one virtio-serial port named
 * AGENT_PORT_NAME. Shared by both sides; docs/vm.md describes it too.
 *
 * Every message is one frame: a 16-byte header, all fields little-endian,
 *
 *   magic (u32 "HUTV") | major (u8) | minor (u8) | type (u8) | channel (u8) |
 *   length (u32, payload bytes, at most AGENT_FRAME_MAX) |
 *   crc (u32, CRC-32 of the payload)
 *
 * followed by the payload. The channel (protocol 1.1; 0 in 1.0) says which
 * command a frame is about: the host picks a free one (below
 * AGENT_MAX_EXECS) for each EXEC, and every frame about that command
 * (STARTED or ERROR, STDIN, STDOUT, STDERR, SIGNAL, ACK, EXIT) carries it;
 * it is free again once its EXIT (or the ERROR that answers its EXEC) was
 * sent. The other frames use channel 0. The agent runs the commands of
 * all channels at once. A reader refuses an unknown magic or major
 * version, a length over AGENT_FRAME_MAX and a bad CRC, and then stops
 * reading the stream (it cannot resynchronise): the host kills the VM.
 *
 * The conversation:
 *
 *   guest: HELLO (after boot: modules loaded, port open; payload: the
 *          kernel release). A template VM is saved right after it.
 *   host:  SETUP (NUL-terminated "key=value" strings, below)
 *   guest: READY, or ERROR
 *   host:  EXEC ("a:ARG" strings for argv in order, "e:KEY=VALUE" for the
 *          environment, one "c:DIR" for the working directory; an argv
 *          that starts with FILE_OP_ARGV0 runs the file operation builtin
 *          of src/shared/file-op.h instead of a program, confined the
 *          same way; "u:SPEC" runs it as that user of its root's
 *          /etc/passwd and /etc/group, setting HOME and USER but for the
 *          ones a "k:HOME" or "k:USER" keeps: docs/vm.md "Images")
 *   guest: STARTED (le32 pid), or ERROR when the command could not be set
 *          up (its exec failing is not an error: exit status 127 or 126)
 *   both:  STDIN from the host (empty payload = end of input); STDOUT and
 *          STDERR from the guest; SIGNAL (le32 signal number) from the host
 *   guest: EXIT (AgentExit) once the command exited, every other process
 *          it started was killed, and its output was sent whole.
 *   Any number of EXECs, on channels of their own, at any time after
 *   READY.
 *
 * Flow control, per channel and direction: at most AGENT_WINDOW bytes of
 * STDIN payload (host to guest), and of STDOUT and STDERR payload together
 * (guest to host), may be on their way unacknowledged. The receiver
 * acknowledges bytes it passed on (or dropped) with ACK (le32 count); it
 * sends one at least whenever AGENT_ACK_MIN bytes are unacknowledged.
 * So each side can always read the port (what it must buffer per channel
 * is bounded), and a command whose output is not read, or that does not
 * read its input, stalls nothing but itself: signals, other commands and
 * their output go on. A sender that overruns the window breaks the
 * protocol.
 *   host:  PING (any payload) at any time; guest: PONG with the same
 *          payload (a liveness check, and the transport's round trip).
 *
 * Protocol 1.3 (docs/vm.md "Published ports and terminals"):
 *   host:  CONNECT (le32 port) on a free channel, as an EXEC: the agent
 *          opens a TCP connection to 127.0.0.1:port in the guest (a
 *          published port's, or the preview route's, connection)
 *   guest: STARTED (pid 0), or ERROR (ECONNREFUSED: nothing listens)
 *   both:  STDIN carries the host side's bytes (empty = its half-close,
 *          passed on with shutdown(SHUT_WR)), STDOUT the guest side's,
 *          with the same windows and ACKs; the host's SIGNAL (any) closes
 *          the connection
 *   guest: EXIT (status 0, no usage) once the guest side's stream ended
 *          and what the host sent was written (or could not be)
 *   An EXEC with a "t:ROWS:COLS" entry runs its command on a new pty of
 *   the sandbox's devpts (its session leader, the slave its controlling
 *   terminal and stdin, stdout and stderr, of that window size): STDIN
 *   goes to the master, the master's output comes as STDOUT (no STDERR),
 *   and an empty STDIN is ignored (a terminal has no end of input).
 *   host:  RESIZE (le32 rows, le32 cols) sets that pty's window size (the
 *          command gets SIGWINCH).
 *
 * Protocol 1.4 (issue 18: a connection's half-close is symmetric):
 *   guest: on a CONNECT's channel, an empty STDOUT once the guest side's
 *          stream ended (its shutdown(SHUT_WR), or its close): the host
 *          passes it on with shutdown(SHUT_WR) once what came before is
 *          written, and keeps sending its own side's bytes
 *   guest: EXIT once both directions ended (the host's half-close passed
 *          on, or the guest side no longer taking its bytes), not at the
 *          end of the guest side's stream alone
 *   host:  EXEC's "u:SPEC", "k:HOME", "k:USER" (issue 17: the command's
 *          user, above); an agent before 1.4 refuses the unknown entry
 *
 * ERROR's payload: le32 errno, then "step" NUL "message" NUL.
 *
 * SETUP keys (each at most once unless said otherwise):
 *   time=SEC.NSEC        the host's CLOCK_REALTIME
 *   seed=HEX             64 random bytes from the host, mixed into the
 *                        guest's pool and the CRNG reseeded (a VM restored
 *                        from a template must not share its randomness)
 *   hostname=NAME
 *   uid=N gid=N ids=N    the guest ids the sandbox's user namespace maps
 *                        its 0..N-1 onto (ids: 1 to 65536, default 1): the
 *                        command is that namespace's root. SECURITY: never
 *                        0 (refused), so that the guest kernel does not
 *                        treat the command as privileged (issue 26)
 *   memory=BYTES pids=N  the command's cgroup limits (0 = none)
 *   size.tmp=, size.home=, size.shm=, size.workspace=   tmpfs sizes
 *   tmpfs=SIZE:PATH      an extra tmpfs (repeatable)
 *   mount=TAG:MODE:PATH  the 9p share TAG at PATH (repeatable); MODE is
 *                        ro, rw, copy (copied into a tmpfs of
 *                        size.workspace) or overlay (a tmpfs upper layer)
 *   link=PATH:TARGET     a symlink in the command's root (repeatable)
 *   bind=SRC:DST         a read-only bind of SRC over DST, both in the
 *                        command's root (repeatable; after the mounts)
 *   cabind=SRC:DST       an image's root only (repeatable, after the
 *                        mounts): the first DST that is a regular file in
 *                        the command's root (resolved inside it, its last
 *                        component never followed; an image's CA bundle,
 *                        rootfs.c's table) and SRC (the sandbox CA) make a
 *                        bundle bound read-only over DST and over SRC
 *   mask=f:PATH, mask=d:PATH   a host file (directory) of the command's
 *                        root that it must not read (/etc/shadow, sudoers,
 *                        SSH host keys...; repeatable, after the mounts):
 *                        covered by an empty read-only file (tmpfs)
 *   readonly=1           --read-only: $HOME and a copied or overlaid
 *                        workspace are read-only too
 *   net=1                bring up eth0 as AGENT_GUEST_ADDR/24, no default
 *                        route (the only peer is the proxy at
 *                        AGENT_PROXY_ADDR)
 *
 * With --secret, the proxy's CA reaches the guest as a read-only share
 * mounted at /run/hutch and a bind over the system bundle (an image's:
 * cabind=); the secrets' values never do. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_MAGIC 0x56545548U /* "HUTV" */
#define AGENT_VERSION_MAJOR 1
#define AGENT_VERSION_MINOR 4
#define AGENT_HEADER_SIZE 16
#define AGENT_FRAME_MAX (64U << 10)
#define AGENT_PORT_NAME "org.hutch.agent.0"
#define AGENT_GUEST_ADDR "10.0.2.15"
#define AGENT_PROXY_ADDR "10.0.2.100"
/* The step of an EXEC's ERROR when its "u:" user could not be found or
 * taken: the host answers it with exit 125, not 126/127. */
#define AGENT_STEP_USER "become the user"

/* Commands at once (channels 0 to AGENT_MAX_EXECS - 1). */
#define AGENT_MAX_EXECS 64
/* Unacknowledged stream bytes per channel and direction. */
#define AGENT_WINDOW (256U << 10)
/* A receiver acknowledges once this much is unacknowledged (at least). */
#define AGENT_ACK_MIN (AGENT_WINDOW / 4)
/* The piece of a stream one STDIN, STDOUT or STDERR frame carries at most. */
#define AGENT_CHUNK (16U << 10)

typedef enum AgentMsg {
        AGENT_MSG_HELLO = 1,
        AGENT_MSG_SETUP,
        AGENT_MSG_READY,
        AGENT_MSG_ERROR,
        AGENT_MSG_EXEC,
        AGENT_MSG_STARTED,
        AGENT_MSG_STDIN,
        AGENT_MSG_STDOUT,
        AGENT_MSG_STDERR,
        AGENT_MSG_SIGNAL,
        AGENT_MSG_EXIT,
        AGENT_MSG_PING,
        AGENT_MSG_PONG,
        AGENT_MSG_ACK,
        AGENT_MSG_CONNECT,
        AGENT_MSG_RESIZE,
        _AGENT_MSG_MAX,
        _AGENT_MSG_INVALID = -22, /* -EINVAL */
} AgentMsg;

/* AgentExit.flags */
#define AGENT_EXIT_OOM (1U << 0)  /* the OOM killer acted in the command's cgroup */
#define AGENT_EXIT_PIDS (1U << 1) /* a fork hit the pids limit */

/* EXIT's payload, little-endian, 24 bytes. */
typedef struct AgentExit {
        int32_t status; /* wait status of the command */
        uint32_t flags;
        uint64_t cpu_usec;       /* the command's cgroup, all its processes */
        uint64_t mem_peak_bytes; /* memory.peak of that cgroup */
} AgentExit;

#define AGENT_EXIT_SIZE 24

/* A frame being reassembled from a byte stream that may deliver it in
 * pieces. */
typedef struct AgentReader {
        size_t len;   /* bytes in buf */
        size_t taken; /* the frame handed out last, dropped by the next call */
        bool broken;
        unsigned char buf[AGENT_HEADER_SIZE + AGENT_FRAME_MAX];
} AgentReader;

/* Reads what @fd has (one read(2); @fd may be non-blocking) into @r.
 * Returns the count read, 0 at EOF, -EAGAIN when nothing was there,
 * -ENOBUFS when a whole frame is waiting (take it first), or -errno. */
ssize_t agent_reader_fill(AgentReader *r, int fd);

/* One frame taken from a reader: the payload points into the reader and
 * is valid until its next call. */
typedef struct AgentFrame {
        uint8_t type; /* an AgentMsg */
        uint8_t chan;
        const void *payload;
        size_t len;
} AgentFrame;

/* Takes the next whole frame: 1 with @ret; 0 when no whole frame is there
 * yet; -EBADMSG for a frame that breaks the rules above (the reader then
 * stays broken). */
int agent_reader_next(AgentReader *r, AgentFrame *ret);

/* The header of a frame of @len bytes (at most AGENT_FRAME_MAX) at
 * @payload. */
void agent_frame_header(unsigned char hdr[AGENT_HEADER_SIZE], AgentMsg type, uint8_t chan,
                        const void *payload, size_t len);

/* Writes one frame (blocking, whole; retries EINTR and short writes).
 * -EMSGSIZE for @len over AGENT_FRAME_MAX. */
int agent_frame_write(int fd, AgentMsg type, uint8_t chan, const void *payload, size_t len);

/* Writes an ERROR frame on @chan: @err (positive errno), @step and @msg. */
int agent_frame_write_error(int fd, uint8_t chan, int err, const char *step, const char *msg);

/* Appends "@prefix@value\0" to the growing buffer *@buf of *@len bytes
 * (realloc'd). -E2BIG when the payload would pass AGENT_FRAME_MAX,
 * -ENOMEM. */
int agent_payload_add(char **buf, size_t *len, const char *prefix, const char *value);

/* Iterates the NUL-terminated strings of a payload: *@pos starts at 0;
 * returns the next string or NULL at the end or when the last string is
 * not terminated. */
const char *agent_payload_next(const void *payload, size_t len, size_t *pos);

void agent_exit_encode(const AgentExit *e, unsigned char out[AGENT_EXIT_SIZE]);
/* -EBADMSG unless @len is AGENT_EXIT_SIZE. */
int agent_exit_decode(const void *payload, size_t len, AgentExit *ret);

/* le32 helpers for the small payloads (STARTED, SIGNAL, ACK, ERROR). */
void agent_put_le32(unsigned char out[4], uint32_t v);
uint32_t agent_get_le32(const unsigned char in[4]);
