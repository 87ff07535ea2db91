/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host's end of the agent's port (src/lib/vm/vm-session.c),
 * against a guest played by the test on the other end of a socketpair:
 * channels, the flow-control windows both ways, and a guest that breaks
 * the rules. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent-protocol.h"
#include "fd-util.h"
#include "test.h"
#include "vm/vm-session.h"

typedef struct Guest {
        Vm vm;
        AgentReader *host_frames; /* what the host sent, as the guest reads it */
        int guest_fd;
        VmMux mux;
        Supervision sup;
        VmSession ss;
        int in[2], out[2]; /* the session's stdin and stdout pipes */
} Guest;

static void guest_init(Guest *g) {
        int sv[2];

        *g = (Guest){};
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv));
        ASSERT_OK(pipe2(g->in, O_CLOEXEC | O_NONBLOCK));
        ASSERT_OK(pipe2(g->out, O_CLOEXEC | O_NONBLOCK));
        g->vm = (Vm){.agent_fd = sv[0], .pid = -1, .pidfd = -EBADF, .qmp_fd = -EBADF};
        g->vm.reader = calloc(1, sizeof(AgentReader));
        g->host_frames = calloc(1, sizeof(AgentReader));
        ASSERT_TRUE(g->vm.reader && g->host_frames);
        g->guest_fd = sv[1];
        vm_mux_init(&g->mux, &g->vm);
        for (size_t i = 0; i < 2; i++)
                g->sup.relays[i] = (Relay){.in_fd = -EBADF, .out_fd = g->out[1]};
        g->ss = (VmSession){.s = &g->sup, .in_fd = g->in[0], .chan = -1};
}

static void guest_done(Guest *g) {
        vm_session_release(&g->mux, &g->ss);
        vm_mux_done(&g->mux);
        (void)close(g->vm.agent_fd);
        (void)close(g->guest_fd);
        for (size_t i = 0; i < 2; i++) {
                (void)close(g->in[i]);
                (void)close(g->out[i]);
        }
        free(g->vm.reader);
        free(g->host_frames);
}

/* The guest sends a frame; the host's loop takes it in. */
static void guest_send(Guest *g, AgentMsg type, uint8_t chan, const void *p, size_t len) {
        struct pollfd pfd = {.revents = POLLIN};

        ASSERT_OK(agent_frame_write(g->guest_fd, type, chan, p, len));
        vm_mux_poll_fill(&g->mux, &pfd);
        pfd.revents = POLLIN;
        vm_mux_poll_handle(&g->mux, &pfd);
}

/* The next frame the host sent, or 0 when there is none. */
static int guest_recv(Guest *g, AgentFrame *ret) {
        int r = agent_reader_next(g->host_frames, ret);

        if (r != 0)
                return r;
        (void)agent_reader_fill(g->host_frames, g->guest_fd);
        return agent_reader_next(g->host_frames, ret);
}

static void guest_start(Guest *g) {
        AgentFrame f;
        unsigned char pid[4];

        ASSERT_OK(vm_session_start(&g->mux, &g->ss, "a:true", 7));
        ASSERT_EQ(g->ss.chan, 0);
        ASSERT_EQ(guest_recv(g, &f), 1);
        ASSERT_EQ(f.type, AGENT_MSG_EXEC);
        ASSERT_EQ(f.chan, 0U);
        agent_put_le32(pid, 42);
        guest_send(g, AGENT_MSG_STARTED, 0, pid, 4);
        ASSERT_TRUE(g->ss.started);
}

TEST(sessions_get_channels_of_their_own) {
        Guest g;
        Supervision sup2 = {};
        VmSession other = {.s = &sup2, .in_fd = -EBADF, .chan = -1};
        AgentFrame f;

        guest_init(&g);
        guest_start(&g);
        ASSERT_OK(vm_session_start(&g.mux, &other, "a:x", 4));
        ASSERT_EQ(other.chan, 1);
        ASSERT_EQ(guest_recv(&g, &f), 1);
        ASSERT_EQ(f.chan, 1U);
        /* An ERROR answers the second EXEC: its channel is free again. */
        ASSERT_OK(agent_frame_write_error(g.guest_fd, 1, ENOENT, "run", "no such file"));
        {
                struct pollfd pfd = {.revents = POLLIN};

                vm_mux_poll_handle(&g.mux, &pfd);
        }
        ASSERT_TRUE(other.failed);
        ASSERT_EQ(other.error.errnum, ENOENT);
        ASSERT_EQ(other.chan, -1);
        ASSERT_TRUE(vm_session_ended(&g.mux, &other));
        ASSERT_FALSE(vm_session_ended(&g.mux, &g.ss));
        ASSERT_EQ(g.mux.error.errnum, 0);
        guest_done(&g);
}

TEST(output_within_the_window_is_held_and_acknowledged_as_written) {
        static char chunk[AGENT_CHUNK];
        struct pollfd p[VM_SESSION_NPOLL];
        Guest g;
        AgentFrame f;
        uint64_t acked = 0, drained = 0;
        char sink[65536];

        guest_init(&g);
        guest_start(&g);
        /* A whole window, with nobody reading the session's stdout. */
        for (size_t i = 0; i < AGENT_WINDOW / AGENT_CHUNK; i++)
                guest_send(&g, AGENT_MSG_STDOUT, 0, chunk, sizeof(chunk));
        ASSERT_EQ(g.mux.error.errnum, 0);
        ASSERT_EQ(g.ss.held, (uint64_t)AGENT_WINDOW);
        ASSERT_EQ(guest_recv(&g, &f), 0); /* nothing taken, nothing acknowledged */
        /* The reader drains: every byte written is acknowledged, in pieces
         * of at least a quarter of the window. */
        while (g.ss.held > 0) {
                ssize_t n;

                vm_session_poll_fill(&g.mux, &g.ss, p);
                ASSERT_EQ(p[1].fd, g.out[1]);
                p[0].revents = 0;
                p[1].revents = POLLOUT;
                p[2].revents = 0;
                vm_session_poll_handle(&g.mux, &g.ss, p);
                while ((n = read(g.out[0], sink, sizeof(sink))) > 0)
                        drained += (uint64_t)n;
        }
        while (guest_recv(&g, &f) == 1) {
                ASSERT_EQ(f.type, AGENT_MSG_ACK);
                ASSERT_TRUE(agent_get_le32(f.payload) >= AGENT_WINDOW / 4);
                acked += agent_get_le32(f.payload);
        }
        ASSERT_EQ(drained, (uint64_t)AGENT_WINDOW);
        ASSERT_EQ(acked, (uint64_t)AGENT_WINDOW);
        guest_done(&g);
}

TEST(a_guest_past_its_output_window_breaks_the_protocol) {
        static char chunk[AGENT_CHUNK];
        Guest g;

        guest_init(&g);
        guest_start(&g);
        for (size_t i = 0; i < AGENT_WINDOW / AGENT_CHUNK; i++)
                guest_send(&g, AGENT_MSG_STDERR, 0, chunk, sizeof(chunk));
        ASSERT_EQ(g.mux.error.errnum, 0);
        guest_send(&g, AGENT_MSG_STDOUT, 0, "x", 1);
        ASSERT_EQ(g.mux.error.errnum, EPROTO);
        ASSERT_TRUE(vm_session_ended(&g.mux, &g.ss));
        /* Held no more than the window. */
        ASSERT_EQ(g.ss.held, (uint64_t)AGENT_WINDOW);
        guest_done(&g);
}

TEST(a_guest_frame_for_no_command_or_out_of_order_breaks_the_protocol) {
        static const struct {
                AgentMsg type;
                uint8_t chan;
        } bad[] = {
                {AGENT_MSG_STDOUT, 5},  /* a channel with no command */
                {AGENT_MSG_EXIT, 3},    /* the same */
                {AGENT_MSG_STARTED, 0}, /* started twice */
                {AGENT_MSG_EXEC, 0},    /* a host's frame */
                {AGENT_MSG_HELLO, 0},
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                Guest g;

                guest_init(&g);
                guest_start(&g);
                guest_send(&g, bad[i].type, bad[i].chan, "abcd", 4);
                ASSERT_EQ(g.mux.error.errnum, EPROTO);
                ASSERT_TRUE(vm_session_ended(&g.mux, &g.ss));
                guest_done(&g);
        }
        /* A malformed frame: the same. */
        {
                Guest g;
                unsigned char junk[AGENT_HEADER_SIZE] = "not a frame!!!!";
                struct pollfd pfd = {.revents = POLLIN};

                guest_init(&g);
                guest_start(&g);
                ASSERT_OK(loop_write(g.guest_fd, junk, sizeof(junk)));
                vm_mux_poll_handle(&g.mux, &pfd);
                ASSERT_EQ(g.mux.error.errnum, EBADMSG);
                guest_done(&g);
        }
}

TEST(stdin_is_read_only_while_its_window_has_room) {
        static char chunk[AGENT_CHUNK];
        struct pollfd p[VM_SESSION_NPOLL];
        unsigned char ack[4];
        Guest g;
        AgentFrame f;
        uint64_t sent = 0;

        guest_init(&g);
        guest_start(&g);
        /* Always stdin waiting; the guest acknowledges none of it. */
        for (;;) {
                vm_session_poll_fill(&g.mux, &g.ss, p);
                if (p[0].fd < 0)
                        break;
                ASSERT_OK(loop_write(g.in[1], chunk, sizeof(chunk)));
                p[0].revents = POLLIN;
                p[1].revents = p[2].revents = 0;
                vm_session_poll_handle(&g.mux, &g.ss, p);
                while (guest_recv(&g, &f) == 1) {
                        ASSERT_EQ(f.type, AGENT_MSG_STDIN);
                        sent += f.len;
                }
                ASSERT_TRUE(sent <= AGENT_WINDOW);
        }
        ASSERT_TRUE(sent > AGENT_WINDOW - AGENT_CHUNK);
        ASSERT_EQ(g.ss.in_flight, sent);
        /* An acknowledgement opens it again. */
        agent_put_le32(ack, (uint32_t)sent);
        guest_send(&g, AGENT_MSG_ACK, 0, ack, 4);
        ASSERT_EQ(g.ss.in_flight, 0U);
        vm_session_poll_fill(&g.mux, &g.ss, p);
        ASSERT_EQ(p[0].fd, g.in[0]);
        guest_done(&g);
}

TEST(every_channel_in_use_is_ebusy) {
        static Supervision sups[AGENT_MAX_EXECS];
        static VmSession many[AGENT_MAX_EXECS];
        VmSession one_more = {.s = &sups[0], .in_fd = -EBADF, .chan = -1};
        Guest g;

        guest_init(&g);
        for (size_t i = 0; i < AGENT_MAX_EXECS; i++) {
                many[i] = (VmSession){.s = &sups[i], .in_fd = -EBADF, .chan = -1};
                ASSERT_OK(vm_session_start(&g.mux, &many[i], "a:x", 4));
                ASSERT_EQ(many[i].chan, (int)i);
        }
        ASSERT_ERROR(vm_session_start(&g.mux, &one_more, "a:x", 4), EBUSY);
        ASSERT_EQ(one_more.chan, -1);
        /* One ends: its channel is the next one's. */
        vm_session_release(&g.mux, &many[7]);
        ASSERT_OK(vm_session_start(&g.mux, &one_more, "a:x", 4));
        ASSERT_EQ(one_more.chan, 7);
        for (size_t i = 0; i < AGENT_MAX_EXECS; i++)
                vm_session_release(&g.mux, &many[i]);
        vm_session_release(&g.mux, &one_more);
        guest_done(&g);
}

TEST(output_after_exit_breaks_the_protocol) {
        unsigned char exit[AGENT_EXIT_SIZE];
        Guest g;

        guest_init(&g);
        guest_start(&g);
        agent_exit_encode(&(AgentExit){.status = 0}, exit);
        guest_send(&g, AGENT_MSG_EXIT, 0, exit, sizeof(exit));
        ASSERT_TRUE(g.ss.exited);
        ASSERT_TRUE(vm_session_ended(&g.mux, &g.ss));
        ASSERT_EQ(g.mux.error.errnum, 0);
        guest_send(&g, AGENT_MSG_STDOUT, 0, "late", 4);
        ASSERT_EQ(g.mux.error.errnum, EPROTO);
        guest_done(&g);
}

TEST(discarded_output_is_acknowledged_and_later_output_dropped) {
        static char chunk[AGENT_CHUNK];
        Guest g;
        AgentFrame f;
        uint64_t acked = 0;

        guest_init(&g);
        guest_start(&g);
        for (size_t i = 0; i < AGENT_WINDOW / AGENT_CHUNK; i++)
                guest_send(&g, AGENT_MSG_STDOUT, 0, chunk, sizeof(chunk));
        ASSERT_TRUE(vm_session_output_pending(&g.ss));
        vm_session_discard_output(&g.mux, &g.ss);
        ASSERT_FALSE(vm_session_output_pending(&g.ss));
        /* More comes: dropped at once, the window reopens as it comes. */
        for (size_t i = 0; i < AGENT_WINDOW / AGENT_CHUNK; i++)
                guest_send(&g, AGENT_MSG_STDOUT, 0, chunk, sizeof(chunk));
        ASSERT_EQ(g.mux.error.errnum, 0);
        ASSERT_FALSE(vm_session_output_pending(&g.ss));
        while (guest_recv(&g, &f) == 1) {
                ASSERT_EQ(f.type, AGENT_MSG_ACK);
                acked += agent_get_le32(f.payload);
        }
        ASSERT_EQ(acked, 2 * (uint64_t)AGENT_WINDOW);
        /* Nothing reached the session's stdout. */
        ASSERT_EQ(read(g.out[0], chunk, 1), -1);
        guest_done(&g);
}

TEST(a_guest_that_does_not_read_its_port_breaks_the_protocol) {
        Guest g;
        int size = 4096;
        size_t sent = 0;

        guest_init(&g);
        (void)setsockopt(g.vm.agent_fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
        guest_start(&g);
        /* Frames for the agent (signals here; acknowledgements of output
         * alike) while the guest never reads: queued up to the bound, and
         * no further. */
        while (g.mux.error.errnum == 0 && sent < 2 * VM_MUX_OUT_MAX / AGENT_HEADER_SIZE) {
                vm_session_signal(&g.mux, &g.ss, SIGWINCH);
                sent++;
        }
        ASSERT_EQ(g.mux.error.errnum, EPROTO);
        ASSERT_TRUE(sent > VM_MUX_OUT_MAX / (AGENT_HEADER_SIZE + 4) / 2);
        ASSERT_TRUE(g.mux.out_len - g.mux.out_off <= VM_MUX_OUT_MAX);
        ASSERT_TRUE(vm_session_ended(&g.mux, &g.ss));
        guest_done(&g);
}

DEFINE_TEST_MAIN
