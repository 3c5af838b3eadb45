package natstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/sluiceflow/sluice/internal/runtest"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// processGone reports whether pid no longer exists (also not as a zombie).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// connectOnce connects without retries, for checks that expect an error.
func connectOnce(url string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append(opts, nats.Timeout(2*time.Second), nats.NoReconnect())
	return nats.Connect(url, opts...)
}

func stream(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestStartPublishStop(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	if s.URL != fmt.Sprintf("nats://127.0.0.1:%d", s.Port) || s.Addr != fmt.Sprintf("127.0.0.1:%d", s.Port) {
		t.Fatalf("URL %q, Addr %q, Port %d", s.URL, s.Addr, s.Port)
	}
	js := stream(t, s.Connect(t))
	if _, err := js.CreateStream(ctx(t), jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}}); err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx(t), "s", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Stream != "S" || ack.Sequence != 1 {
		t.Fatalf("PubAck %+v", ack)
	}
	if entries, err := os.ReadDir(s.StoreDir); err != nil || len(entries) == 0 {
		t.Fatalf("store dir %s: %v entries, err %v", s.StoreDir, len(entries), err)
	}
	pid := s.Pid()
	if pid == 0 || !s.Running() {
		t.Fatal("server not running")
	}
	s.Stop()
	if s.Running() || s.Pid() != 0 || !processGone(pid) {
		t.Fatalf("process %d still there after Stop", pid)
	}
	s.Stop() // twice is fine
	s.Kill()
	if _, err := connectOnce(s.URL); err == nil {
		t.Fatal("connected to a stopped server")
	}
}

// A restarted server keeps its port and its JetStream store, after a clean
// stop or a kill, and a client that reconnects forever finds it again.
func TestRestartKeepsStore(t *testing.T) {
	t.Parallel()
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			t.Parallel()
			s := Start(t, Options{})
			nc := s.Connect(t)
			js := stream(t, nc)
			if _, err := js.CreateStream(ctx(t), jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}}); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, err := js.Publish(ctx(t), "s", fmt.Appendf(nil, "m%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			url, pid := s.URL, s.Pid()
			if kill {
				s.Kill()
			} else {
				s.Stop()
			}
			if !processGone(pid) {
				t.Fatalf("process %d still there", pid)
			}
			s.Restart(t)
			if s.URL != url || s.Pid() == pid {
				t.Fatalf("after Restart: URL %q (was %q), pid %d (was %d)", s.URL, url, s.Pid(), pid)
			}
			// The first client reconnects by itself.
			runtest.WaitFor(t, "the client to reconnect", nc.IsConnected, runtest.Within(10*time.Second),
				runtest.Showing(func() string { return fmt.Sprint("status ", nc.Status()) }))
			st, err := js.Stream(ctx(t), "S")
			if err != nil {
				t.Fatal(err)
			}
			info, err := st.Info(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs != 3 {
				t.Fatalf("stream has %d messages after restart, want 3", info.State.Msgs)
			}
			msg, err := st.GetMsg(ctx(t), 3)
			if err != nil || string(msg.Data) != "m2" {
				t.Fatalf("message 3: %v, %v", msg, err)
			}
		})
	}
}

func TestRestartRunningServer(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	pid := s.Pid()
	s.Restart(t) // stops it first
	if !processGone(pid) || !s.Running() {
		t.Fatalf("old process %d gone: %v; running: %v", pid, processGone(pid), s.Running())
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts Options
		bad  []nats.Option
	}{
		{"user", Options{User: "alice", Password: "s3cret"},
			[]nats.Option{nats.UserInfo("alice", "wrong")}},
		{"token", Options{Token: "t0ken"},
			[]nats.Option{nats.Token("wrong")}},
		{"nkey", Options{NKeySeed: userSeed(t)},
			[]nats.Option{nkeyOption(t, userSeed(t))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := Start(t, c.opts)
			nc, err := connectOnce(s.URL, s.ClientOptions()...)
			if err != nil {
				t.Fatalf("good credentials: %v", err)
			}
			nc.Close()
			for name, opts := range map[string][]nats.Option{"none": nil, "wrong": c.bad} {
				nc, err := connectOnce(s.URL, opts...)
				if err == nil {
					nc.Close()
					t.Fatalf("%s credentials: connected", name)
				}
				if !errors.Is(err, nats.ErrAuthorization) {
					t.Fatalf("%s credentials: %v, want an authorization error", name, err)
				}
			}
		})
	}
}

// userSeed returns the seed of a new user nkey.
func userSeed(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return string(seed)
}

// nkeyOption signs in as the user of seed.
func nkeyOption(t *testing.T, seed string) nats.Option {
	t.Helper()
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return nats.Nkey(pub, kp.Sign)
}

// The process is gone once the test that started it has finished.
func TestCleanupKills(t *testing.T) {
	t.Parallel()
	var pid int
	var addr string
	t.Run("inner", func(t *testing.T) {
		s := Start(t, Options{})
		pid, addr = s.Pid(), s.Addr
	})
	if !processGone(pid) {
		t.Fatalf("process %d survived its test", pid)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections", addr)
	}
}
