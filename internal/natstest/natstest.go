// Package natstest starts real nats-server processes with JetStream for tests.
//
// Every server listens on a free port on 127.0.0.1 with monitoring off, keeps
// its JetStream store and its log in its own temporary directory, and is
// killed and reaped when the test that started it finishes. [Server.Restart]
// brings a server back on the same port with the same store directory, so
// file-backed streams, their messages and their consumers' state survive it.
// Nothing here ever talks to a host other than the loopback interface.
//
// nats-server must be on PATH or in /usr/sbin (where Debian's package puts
// it); if it is not, Start fails the test with a hint on how to install it
// (tests are never skipped).
package natstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/sluiceflow/sluice/internal/proctest"
)

const (
	startTimeout   = 10 * time.Second // until a started process accepts a client and JetStream answers
	restartTimeout = 10 * time.Second // Restart: how long to wait for the port to become free
	stopGrace      = 15 * time.Second // SIGTERM before falling back to SIGKILL
	portAttempts   = 5                // fresh ports tried when the chosen one was taken
	probeTimeout   = 2 * time.Second
	pollInterval   = 25 * time.Millisecond
)

const notFoundHint = "nats-server not found on PATH or in /usr/sbin: run make test, which installs it, or apt-get install nats-server"

// Options configure a server started by Start. User/Password, Token and
// NKeySeed are exclusive; without any of them the server accepts any client.
type Options struct {
	// User and Password make the server require them (--user, --pass).
	User, Password string
	// Token makes the server require an authorization token (--auth).
	Token string
	// NKeySeed, a user nkey seed (SU...), makes the server require the user
	// of its public key, who signs the server's nonce with the seed. The
	// server reads the user from a configuration file (-c) in Dir.
	NKeySeed string
	// Args are extra nats-server arguments, e.g. {"-D"}. They come last.
	Args []string
}

// Server is a nats-server process started by this package, with JetStream
// enabled and its store in StoreDir.
type Server struct {
	URL      string // nats://127.0.0.1:port
	Addr     string // 127.0.0.1:port
	Port     int
	Dir      string // temp dir holding nats.log (the server's output) and the store
	StoreDir string // the JetStream store directory (-sd)

	opts    Options
	name    string // server_name, unique in the test binary: identifies our process
	bin     string
	tb      testing.TB
	proc    proctest.Slot // the process, when running
	startMu sync.Mutex    // serialises starts and restarts
}

var serverSeq atomic.Uint64

// natsServerPath returns the nats-server binary or fails the test.
func natsServerPath(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	const debian = "/usr/sbin/nats-server"
	if fi, err := os.Stat(debian); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return debian
	}
	t.Fatal(notFoundHint)
	return ""
}

// Start starts a nats-server with JetStream and the given options, and waits
// (at most 10 s) until it accepts a client and answers a JetStream request.
// The server is killed when the test finishes.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if n := btoi(o.Token != "") + btoi(o.User != "" || o.Password != "") + btoi(o.NKeySeed != ""); n > 1 {
		t.Fatal("natstest: Options.Token, Options.User/Password and Options.NKeySeed are exclusive")
	}
	o.Args = append([]string(nil), o.Args...)
	s := &Server{
		Dir:  t.TempDir(),
		opts: o,
		name: fmt.Sprintf("natstest-%d-%d", os.Getpid(), serverSeq.Add(1)),
		bin:  natsServerPath(t),
		tb:   t,
	}
	s.StoreDir = filepath.Join(s.Dir, "store")
	if o.NKeySeed != "" {
		if err := s.writeNKeyConfig(); err != nil {
			t.Fatalf("natstest: %v", err)
		}
	}
	// Registered after t.TempDir, so the process is gone before the
	// directory is removed.
	t.Cleanup(s.Kill)

	s.startMu.Lock()
	defer s.startMu.Unlock()
	var err error
	for range portAttempts {
		var port int
		if port, err = proctest.FreePort(); err != nil {
			t.Fatalf("natstest: find a free port: %v", err)
		}
		s.setPort(port)
		if err = s.run(); err == nil || !errors.Is(err, proctest.ErrAddrInUse) {
			break
		}
	}
	if err != nil {
		t.Fatalf("natstest: start nats-server: %v", err)
	}
	return s
}

func (s *Server) setPort(port int) {
	s.Port = port
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.URL = "nats://" + s.Addr
}

// args returns the nats-server command line for the current port.
func (s *Server) args() []string {
	a := []string{
		"-a", "127.0.0.1",
		"-p", strconv.Itoa(s.Port),
		"-n", s.name,
		"-js",
		"-sd", s.StoreDir,
	}
	o := s.opts
	if o.User != "" || o.Password != "" {
		a = append(a, "--user", o.User, "--pass", o.Password)
	}
	if o.Token != "" {
		a = append(a, "--auth", o.Token)
	}
	if o.NKeySeed != "" {
		a = append(a, "-c", filepath.Join(s.Dir, nkeyConfig))
	}
	return append(a, o.Args...)
}

// nkeyConfig is the configuration file, in Dir, of a server started with
// Options.NKeySeed.
const nkeyConfig = "nkey.conf"

// writeNKeyConfig writes the configuration file that makes the server
// require the user of Options.NKeySeed.
func (s *Server) writeNKeyConfig() error {
	kp, err := nkeys.FromSeed([]byte(s.opts.NKeySeed))
	if err != nil {
		return fmt.Errorf("Options.NKeySeed: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("Options.NKeySeed: %w", err)
	}
	conf := "authorization {\n  users = [\n    { nkey: " + strconv.Quote(pub) + " }\n  ]\n}\n"
	return os.WriteFile(filepath.Join(s.Dir, nkeyConfig), []byte(conf), 0o600)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// run starts the process on s.Port and waits until it is ready. On failure
// the process is gone when run returns.
func (s *Server) run() error {
	p, err := proctest.Start(proctest.Spec{
		Bin: s.bin, Args: s.args(), Dir: s.Dir, Output: filepath.Join(s.Dir, "nats.log"),
		Secrets: []string{"--pass", "--auth"},
		Ready:   func(context.Context, int) error { return s.checkReady() },
		Timeout: startTimeout, Poll: pollInterval, NotReady: s.URL + " not ready",
	})
	if err != nil {
		return err
	}
	s.proc.Set(p)
	return nil
}

// checkReady connects, checks that the server answering is the one started
// (by its unique server name) and that JetStream answers.
func (s *Server) checkReady() error {
	opts := append(s.ClientOptions(), nats.Timeout(probeTimeout), nats.NoReconnect(), nats.Name("natstest probe"))
	nc, err := nats.Connect(s.URL, opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	if got := nc.ConnectedServerName(); got != s.name {
		return fmt.Errorf("%s is served by %q, not by the started server %q", s.Addr, got, s.name)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// ClientOptions returns nats.go options with the server's credentials (none
// for a server without auth).
func (s *Server) ClientOptions() []nats.Option {
	var opts []nats.Option
	if s.opts.User != "" || s.opts.Password != "" {
		opts = append(opts, nats.UserInfo(s.opts.User, s.opts.Password))
	}
	if s.opts.Token != "" {
		opts = append(opts, nats.Token(s.opts.Token))
	}
	if s.opts.NKeySeed != "" {
		// Start checked the seed.
		kp, _ := nkeys.FromSeed([]byte(s.opts.NKeySeed))
		pub, _ := kp.PublicKey()
		opts = append(opts, nats.Nkey(pub, kp.Sign))
	}
	return opts
}

// Connect returns a client connection to the server (credentials applied)
// that reconnects forever; it is closed when the test finishes.
func (s *Server) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	opts := append(s.ClientOptions(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	nc, err := nats.Connect(s.URL, opts...)
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", s.URL, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Stop stops the server gracefully (SIGTERM: JetStream writes its state out)
// and waits for the process to exit; after 15 s it is killed. Stopping a
// stopped server does nothing.
func (s *Server) Stop() { s.stop(syscall.SIGTERM) }

// Kill kills the server (SIGKILL) and waits for the process to exit. Killing
// a stopped server does nothing.
func (s *Server) Kill() { s.stop(syscall.SIGKILL) }

func (s *Server) stop(sig syscall.Signal) {
	if s.proc.Stop(sig, stopGrace) {
		s.tb.Logf("natstest: %s did not exit %v after %v; killed it", s.Addr, stopGrace, sig)
	}
}

// Running reports whether the server process is running.
func (s *Server) Running() bool { return s.proc.Running() }

// Pid returns the process id of the running server, or 0.
func (s *Server) Pid() int { return s.proc.Pid() }

// Restart starts the server again on the same port with the same options
// and store directory (after Stop or Kill; a running server is stopped
// first), and waits until it accepts clients and JetStream answers. While
// the old process's port is still taken it retries for up to 10 s.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.startMu.Lock()
	defer s.startMu.Unlock()
	deadline := time.Now().Add(restartTimeout)
	for {
		err := s.run()
		if err == nil {
			return
		}
		if !errors.Is(err, proctest.ErrAddrInUse) || time.Now().After(deadline) {
			t.Fatalf("natstest: restart nats-server on %s: %v", s.Addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Log returns the server's output so far (all its runs), for failure
// messages.
func (s *Server) Log() string {
	data, _ := os.ReadFile(filepath.Join(s.Dir, "nats.log"))
	return string(data)
}
