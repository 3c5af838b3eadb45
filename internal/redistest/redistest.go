// Package redistest starts real redis-server processes for tests.
//
// Every server listens on a free port on 127.0.0.1, keeps its files (log,
// certificates, sentinel config) in its own temporary directory, runs with
// persistence off (save "", appendonly no) and is killed and reaped when the
// test that started it finishes. Nothing here ever talks to a host other than
// the loopback interface.
//
// redis-server must be on PATH; if it is not, Start fails the test with a hint
// on how to install it (tests are never skipped).
package redistest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/sluiceflow/sluice/internal/proctest"
)

const (
	startTimeout   = 10 * time.Second // until a started process answers PING
	restartTimeout = 10 * time.Second // Restart: how long to wait for the port to become free
	stopGrace      = 15 * time.Second // SIGTERM before falling back to SIGKILL
	portAttempts   = 5                // fresh ports tried when the chosen one was taken
	probeTimeout   = 2 * time.Second
	doTimeout      = 15 * time.Second
	pollInterval   = 25 * time.Millisecond
)

const notFoundHint = "redis-server not found: run make test, which installs it, or apt-get install redis-server"

// User is an ACL user with all permissions (~* &* +@all).
type User struct{ Name, Password string }

// Options configure a server started by Start.
type Options struct {
	// Password is requirepass, the default user's password.
	Password string
	// Users are extra ACL users, each with all permissions.
	Users []User
	// TLS makes the server serve TLS only (port 0, tls-port P) with
	// certificates from a throwaway CA made in the test (shared by all TLS
	// servers of the test binary); client certificates are optional
	// (tls-auth-clients optional). TLS servers also replicate over TLS.
	TLS bool
	// ReplicaOf is the host:port of a master to replicate; it must be on
	// the loopback interface (127.0.0.1, ::1 or localhost). Every server
	// (master or not, as sentinels may reconfigure it) authenticates to its
	// master with the credentials it accepts itself: the first of Users if
	// any, else the default user with Password (masteruser/masterauth).
	ReplicaOf string
	// Args are extra redis-server arguments, e.g. {"--maxmemory", "10mb"}.
	// They come last, so they override the helper's defaults.
	Args []string
}

// Server is a redis-server process (or a sentinel) started by this package.
type Server struct {
	Addr string // 127.0.0.1:port
	Port int
	Dir  string // temp dir holding redis.log, stdout.log and, for TLS, the PEM files

	// For TLS servers: PEM file paths.
	CAFile, CertFile, KeyFile     string // the server's CA (to trust), server cert/key
	ClientCertFile, ClientKeyFile string // a client certificate signed by the same CA

	opts     Options
	sentinel bool
	cluster  bool          // a cluster node: cluster-enabled, nodes-<port>.conf in Dir
	confFile string        // sentinel only: the config file (rewritten by sentinel)
	conf     func() string // sentinel only: initial config for the current port
	authConf []string      // sentinel only: correctly quoted "sentinel auth-*" lines
	tlsConf  *tls.Config   // client side, nil without TLS
	tb       testing.TB    // the test that started the server, for logging
	mu       sync.Mutex    // guards Addr/Port while they are set, and do
	proc     proctest.Slot // the process, when running
	do       *redis.Client // used by Do, created on first use
	startMu  sync.Mutex    // serialises starts/restarts
}

// redisServerPath returns the redis-server binary or fails the test.
func redisServerPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(notFoundHint)
	}
	return p
}

// Start starts a redis-server with the given options and waits (at most 10 s)
// until it answers PING. The server is killed when the test finishes.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := redisServerPath(t)
	s := newServer(t, o, false)
	s.startFresh(t, bin)
	return s
}

// newServer creates the server's directory and TLS material and registers
// its cleanup. The cleanup is registered after t.TempDir, so the process is
// gone before the directory is removed.
func newServer(t testing.TB, o Options, sentinel bool) *Server {
	t.Helper()
	if o.ReplicaOf != "" && !isLoopback(o.ReplicaOf) {
		t.Fatalf("redistest: ReplicaOf %q is not a 127.0.0.1/localhost host:port; tests only talk to servers on this machine", o.ReplicaOf)
	}
	o.Users = append([]User(nil), o.Users...)
	o.Args = append([]string(nil), o.Args...)
	s := &Server{Dir: t.TempDir(), opts: o, sentinel: sentinel, tb: t}
	if o.TLS {
		if err := s.writeTLSFiles(); err != nil {
			t.Fatalf("redistest: TLS setup: %v", err)
		}
	}
	t.Cleanup(s.Kill)
	t.Cleanup(s.closeDoClient)
	return s
}

// startFresh picks a free port and starts the process, retrying with another
// port if the chosen one was taken in the meantime.
func (s *Server) startFresh(t testing.TB, bin string) {
	t.Helper()
	s.startMu.Lock()
	defer s.startMu.Unlock()
	var err error
	for range portAttempts {
		var port int
		if port, err = pickPort(); err != nil {
			t.Fatalf("redistest: find a free port: %v", err)
		}
		s.setPort(port)
		if s.sentinel {
			if err = os.WriteFile(s.confFile, []byte(s.conf()), 0o600); err != nil {
				t.Fatalf("redistest: write sentinel config: %v", err)
			}
		}
		if err = s.run(bin); err == nil {
			return
		}
		if !errors.Is(err, proctest.ErrAddrInUse) {
			break
		}
	}
	t.Fatalf("redistest: start %s: %v", s.kind(), err)
}

func (s *Server) kind() string {
	if s.sentinel {
		return "redis sentinel"
	}
	return "redis-server"
}

func (s *Server) setPort(port int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Port = port
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// pickPort is proctest.FreePort; tests replace it to simulate a lost race for
// a port.
var pickPort = proctest.FreePort

// args returns the redis-server command line for the current port.
func (s *Server) args() []string {
	logFile := filepath.Join(s.Dir, "redis.log")
	if s.sentinel {
		// Everything else is in the (sentinel-rewritten) config file.
		return []string{s.confFile, "--sentinel"}
	}
	o := s.opts
	a := []string{
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--logfile", logFile,
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		// Start full syncs at once instead of waiting 5 s for more replicas.
		"--repl-diskless-sync-delay", "0",
	}
	if o.TLS {
		a = append(a, s.tlsArgs()...)
	} else {
		a = append(a, "--port", strconv.Itoa(s.Port))
	}
	if o.Password != "" {
		a = append(a, "--requirepass", o.Password)
	}
	for _, u := range o.Users {
		a = append(a, "--user", u.Name, "on", ">"+u.Password, "~*", "&*", "+@all")
	}
	// Masters get masteruser/masterauth too: sentinels may turn them into
	// replicas after a failover.
	if user, pass := o.serverCredentials(); pass != "" {
		if user != "" {
			a = append(a, "--masteruser", user)
		}
		a = append(a, "--masterauth", pass)
	}
	if o.ReplicaOf != "" {
		host, port, err := net.SplitHostPort(o.ReplicaOf)
		if err != nil {
			host, port = o.ReplicaOf, "" // redis-server reports the bad value
		}
		a = append(a, "--replicaof", host, port)
	}
	if s.cluster {
		a = append(a, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.Dir, "nodes-"+strconv.Itoa(s.Port)+".conf"))
	}
	return append(a, o.Args...)
}

func (s *Server) tlsArgs() []string {
	return []string{
		"--port", "0",
		"--tls-port", strconv.Itoa(s.Port),
		"--tls-cert-file", s.CertFile,
		"--tls-key-file", s.KeyFile,
		"--tls-ca-cert-file", s.CAFile,
		"--tls-auth-clients", "optional",
		"--tls-replication", "yes",
		"--tls-client-cert-file", s.ClientCertFile,
		"--tls-client-key-file", s.ClientKeyFile,
	}
}

// serverCredentials are what replicas and sentinels use to log in: the first
// ACL user if any, else the default user with Password.
func (o Options) serverCredentials() (user, pass string) {
	if len(o.Users) > 0 {
		return o.Users[0].Name, o.Users[0].Password
	}
	return "", o.Password
}

// run starts the process on s.Port and waits until it answers PING. On
// failure the process is gone when run returns.
func (s *Server) run(bin string) error {
	p, err := proctest.Start(proctest.Spec{
		Bin: bin, Args: s.args(), Dir: s.Dir,
		Output: filepath.Join(s.Dir, "stdout.log"), Logs: []string{filepath.Join(s.Dir, "redis.log")},
		Ready: s.checkOwnPing, Timeout: startTimeout, Poll: pollInterval, NotReady: "no PONG from " + s.Addr,
	})
	if err != nil {
		return err
	}
	s.proc.Set(p)
	return nil
}

// checkOwnPing sends PING and checks that the answering server is the
// process we started (and not one that grabbed the port first).
func (s *Server) checkOwnPing(ctx context.Context, pid int) error {
	c, err := s.probe(ctx, probeTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.do(probeTimeout, "PING")
	if err != nil {
		return err
	}
	if v != "PONG" {
		return fmt.Errorf("PING answered %v", v)
	}
	v, err = c.do(probeTimeout, "INFO", "server")
	if err != nil {
		return err
	}
	info, _ := v.(string)
	if got := infoField(info, "process_id"); got != strconv.Itoa(pid) {
		return fmt.Errorf("%s is served by process %q, not by the started process %d", s.Addr, got, pid)
	}
	return nil
}

// probe opens a helper connection with the server's TLS and credentials.
func (s *Server) probe(ctx context.Context, timeout time.Duration) (*probeConn, error) {
	pass := ""
	if !s.sentinel {
		pass = s.opts.Password
	}
	return dialProbe(ctx, s.Addr, s.tlsConf, "", pass, timeout)
}

// probeDo runs one command on a fresh helper connection.
func (s *Server) probeDo(timeout time.Duration, args ...string) (any, error) {
	c, err := s.probe(context.Background(), timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.do(timeout, args...)
}

// Stop stops the server gracefully (SIGTERM) and waits for the process to
// exit; after 15 s it is killed. Stopping a stopped server does nothing.
func (s *Server) Stop() { s.stop(syscall.SIGTERM) }

// Kill kills the server (SIGKILL) and waits for the process to exit. Killing
// a stopped server does nothing.
func (s *Server) Kill() { s.stop(syscall.SIGKILL) }

func (s *Server) stop(sig syscall.Signal) {
	if s.proc.Stop(sig, stopGrace) {
		s.tb.Logf("redistest: %s did not exit %v after %v; killed it", s.Addr, stopGrace, sig)
	}
}

// Running reports whether the server process is running.
func (s *Server) Running() bool { return s.proc.Running() }

// Pid returns the process id of the running server, or 0.
func (s *Server) Pid() int { return s.proc.Pid() }

// Restart starts the server again on the same port with the same options
// (after Stop or Kill; a running server is stopped first) and waits until it
// answers PING. Data is not persisted, so a restarted master is empty. A
// restarted sentinel reads the config file it rewrote while running.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	bin := redisServerPath(t)
	s.Stop()
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if s.sentinel {
		if err := s.repairSentinelConf(); err != nil {
			t.Fatalf("redistest: restart sentinel %s: %v", s.Addr, err)
		}
	}
	deadline := time.Now().Add(restartTimeout)
	for {
		err := s.run(bin)
		if err == nil {
			return
		}
		if !errors.Is(err, proctest.ErrAddrInUse) || time.Now().After(deadline) {
			t.Fatalf("redistest: restart %s on %s: %v", s.kind(), s.Addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TLSConfig returns a new client tls.Config trusting the server's CA and
// presenting the client certificate, or nil for a plain server.
func (s *Server) TLSConfig() *tls.Config {
	if s.tlsConf == nil {
		return nil
	}
	return s.tlsConf.Clone()
}

// ClientOptions returns go-redis options for the server: its address, the
// default user's password (not for sentinels) and TLS.
func (s *Server) ClientOptions() *redis.Options {
	o := &redis.Options{Addr: s.Addr, TLSConfig: s.TLSConfig()}
	if !s.sentinel {
		o.Password = s.opts.Password
	}
	return o
}

// Client returns a client for the server (password and TLS applied); it is
// closed when the test finishes.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.ClientOptions())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Do runs one command and returns its result (nil for a nil reply; replies
// are RESP3, so e.g. CONFIG GET gives a map). Any other error fails the test.
//
// Do reuses one connection per server, made without the client library's
// optional handshake commands (CLIENT SETINFO, CLIENT MAINT_NOTIFICATIONS),
// so INFO commandstats only shows the commands run (plus a HELLO per
// connection and the PING and INFO of the startup check).
func (s *Server) Do(t testing.TB, args ...any) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), doTimeout)
	defer cancel()
	v, err := s.doClient().Do(ctx, args...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("redistest: %s %v: %v", s.Addr, args, err)
	}
	return v
}

func (s *Server) doClient() *redis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.do == nil {
		o := s.ClientOptions()
		o.DisableIdentity = true
		o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		o.ReadTimeout = doTimeout
		o.WriteTimeout = doTimeout
		s.do = redis.NewClient(o)
	}
	return s.do
}

func (s *Server) closeDoClient() {
	s.mu.Lock()
	c := s.do
	s.do = nil
	s.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}
