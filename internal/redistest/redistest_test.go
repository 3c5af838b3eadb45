package redistest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluiceflow/sluice/internal/proctest"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// quick returns a client that fails fast instead of retrying, for checks
// that expect an error.
func quick(t *testing.T, o *redis.Options) *redis.Client {
	o.MaxRetries = -1
	o.DialerRetries = 1
	o.DialTimeout = 2 * time.Second
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// processGone reports whether pid no longer exists (also not as a zombie).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestStartPingStop(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") || s.Addr != fmt.Sprintf("127.0.0.1:%d", s.Port) {
		t.Fatalf("Addr %q, Port %d", s.Addr, s.Port)
	}
	c := s.Client(t)
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx(t), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := s.Do(t, "GET", "k"); got != "v" {
		t.Fatalf("GET k = %v", got)
	}
	if got := s.Do(t, "GET", "missing"); got != nil {
		t.Fatalf("GET missing = %v, want nil", got)
	}
	info, _ := s.Do(t, "INFO", "commandstats").(string)
	if !strings.Contains(info, "cmdstat_set:calls=1,") || !strings.Contains(info, "cmdstat_get:calls=2,") {
		t.Fatalf("INFO commandstats lacks the SET and GETs:\n%s", info)
	}
	// Do adds no handshake commands beyond one HELLO.
	s.Do(t, "CONFIG", "RESETSTAT")
	s.Do(t, "PING")
	s.Do(t, "PING")
	info, _ = s.Do(t, "INFO", "commandstats").(string)
	for _, l := range strings.Split(strings.TrimSpace(info), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "cmdstat_") &&
			!strings.HasPrefix(l, "cmdstat_ping:calls=2,") && !strings.HasPrefix(l, "cmdstat_config|resetstat:") {
			t.Errorf("unexpected command after CONFIG RESETSTAT: %s", l)
		}
	}
	cfg, _ := s.Do(t, "CONFIG", "GET", "save").(map[any]any)
	if cfg["save"] != "" {
		t.Fatalf("CONFIG GET save = %v, want empty", cfg)
	}
	if _, err := os.Stat(s.Dir + "/redis.log"); err != nil {
		t.Fatalf("log file: %v", err)
	}

	pid := s.Pid()
	if pid == 0 || !s.Running() {
		t.Fatal("server not running")
	}
	s.Stop()
	if s.Running() || s.Pid() != 0 {
		t.Fatal("server still running after Stop")
	}
	if !processGone(pid) {
		t.Fatalf("process %d still exists after Stop", pid)
	}
	if err := quick(t, s.ClientOptions()).Ping(ctx(t)).Err(); err == nil {
		t.Fatal("PING succeeded after Stop")
	}
	s.Stop() // no-op
	s.Kill() // no-op
}

func TestRestart(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{Password: "pw"})
	addr, port := s.Addr, s.Port
	if got := s.Do(t, "SET", "k", "v"); got != "OK" {
		t.Fatalf("SET = %v", got)
	}
	s.Stop()
	s.Restart(t)
	if s.Addr != addr || s.Port != port {
		t.Fatalf("restarted on %s, want %s", s.Addr, addr)
	}
	if got := s.Do(t, "PING"); got != "PONG" {
		t.Fatalf("PING = %v", got)
	}
	if got := s.Do(t, "GET", "k"); got != nil {
		t.Fatalf("GET k after restart = %v, want nil (no persistence)", got)
	}

	// A client created before the restart reconnects.
	c := s.Client(t)
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Restart(t)
	if s.Port != port {
		t.Fatalf("restarted on port %d, want %d", s.Port, port)
	}
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING after Kill+Restart: %v", err)
	}

	// Restart of a running server stops it first.
	old := s.Pid()
	s.Restart(t)
	if s.Pid() == old || !processGone(old) {
		t.Fatalf("Restart of a running server: pid %d -> %d", old, s.Pid())
	}
}

func TestKill(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	pid := s.Pid()
	s.Kill()
	if !processGone(pid) {
		t.Fatalf("process %d still exists after Kill", pid)
	}
	if err := quick(t, s.ClientOptions()).Ping(ctx(t)).Err(); err == nil {
		t.Fatal("PING succeeded after Kill")
	}
}

func TestPassword(t *testing.T) {
	t.Parallel()
	const pw = `s3cret "pass" word`
	s := Start(t, Options{Password: pw})
	if err := s.Client(t).Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING with password: %v", err)
	}

	o := s.ClientOptions()
	o.Password = ""
	err := quick(t, o).Ping(ctx(t)).Err()
	if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("PING without password: %v, want NOAUTH", err)
	}

	o = s.ClientOptions()
	o.Password = "wrong"
	err = quick(t, o).Ping(ctx(t)).Err()
	if err == nil || !(strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "invalid password")) {
		t.Fatalf("PING with a wrong password: %v, want WRONGPASS", err)
	}
}

func TestACLUser(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{Users: []User{{"alice", "al1ce pw"}, {"bob", "b0b"}}})
	for _, u := range []User{{"alice", "al1ce pw"}, {"bob", "b0b"}} {
		o := s.ClientOptions()
		o.Username, o.Password = u.Name, u.Password
		c := quick(t, o)
		who, err := c.Do(ctx(t), "ACL", "WHOAMI").Result()
		if err != nil || who != u.Name {
			t.Fatalf("ACL WHOAMI as %s = %v, %v", u.Name, who, err)
		}
		// All permissions: keys, pub/sub channels, admin commands.
		if err := c.Set(ctx(t), "k:"+u.Name, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Publish(ctx(t), "chan", "m").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.ConfigGet(ctx(t), "maxmemory").Err(); err != nil {
			t.Fatal(err)
		}
	}
	o := s.ClientOptions()
	o.Username, o.Password = "alice", "nope"
	err := quick(t, o).Ping(ctx(t)).Err()
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("wrong ACL password: %v, want WRONGPASS", err)
	}
	// Without requirepass the default user needs no password.
	if err := s.Client(t).Ping(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{TLS: true, Password: "pw"})
	for _, f := range []string{s.CAFile, s.CertFile, s.KeyFile, s.ClientCertFile, s.ClientKeyFile} {
		if _, err := os.Stat(f); f == "" || err != nil {
			t.Fatalf("TLS file %q: %v", f, err)
		}
	}
	if err := s.Client(t).Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}

	// Only the CA file, no client certificate (tls-auth-clients optional).
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("CAFile holds no certificate")
	}
	o := s.ClientOptions()
	o.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if err := quick(t, o).Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING trusting CAFile: %v", err)
	}

	o = s.ClientOptions()
	o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	err = quick(t, o).Ping(ctx(t)).Err()
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("PING without the CA: %v, want a certificate error", err)
	}

	o = s.ClientOptions()
	o.TLSConfig = nil
	if err := quick(t, o).Ping(ctx(t)).Err(); err == nil {
		t.Fatal("plain-text PING to the TLS port succeeded")
	}

	// TLS replicas trust their master (same throwaway CA).
	if err := s.Client(t).Set(ctx(t), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := Start(t, Options{TLS: true, Password: "pw", ReplicaOf: s.Addr})
	waitFor(t, 10*time.Second, "TLS replication", func() error {
		if err := replicaLinkUp(r); err != nil {
			return err
		}
		if v, err := r.probeDo(probeTimeout, "GET", "k"); v != "v" {
			return fmt.Errorf("GET k on replica = %v, %v", v, err)
		}
		return nil
	}, func() string { return proctest.LogTail(r.Dir+"/redis.log", 0) })
}

func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	sn := StartSentinel(t, Options{Password: "pw", Users: []User{{"repl", "repl pw"}}})
	if len(sn.Sentinels) != 3 || len(sn.Endpoints()) != 3 {
		t.Fatalf("%d sentinels, endpoints %v", len(sn.Sentinels), sn.Endpoints())
	}
	for _, e := range sn.Endpoints() {
		if !strings.HasPrefix(e, "127.0.0.1:") {
			t.Fatalf("sentinel endpoint %s", e)
		}
	}
	oldMaster, oldReplica := sn.Master, sn.Replica
	if got := sn.MasterAddr(t); got != oldMaster.Addr {
		t.Fatalf("MasterAddr = %s, want %s", got, oldMaster.Addr)
	}
	// The sentinels log in as the first ACL user.
	if got := sn.Sentinels[0].Do(t, "SENTINEL", "MASTER", sn.MasterName); got == nil {
		t.Fatal("SENTINEL MASTER = nil")
	}

	fc := sn.FailoverClient(t)
	if err := fc.Set(ctx(t), "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}

	sn.Failover(t)

	if sn.Master != oldReplica || sn.Replica != oldMaster {
		t.Fatal("Failover did not swap Master and Replica")
	}
	if got := sn.MasterAddr(t); got != oldReplica.Addr {
		t.Fatalf("MasterAddr after failover = %s, want the old replica %s", got, oldReplica.Addr)
	}
	for _, ss := range sn.Sentinels {
		if addr, err := sn.masterAddrFrom(ss); err != nil || addr != oldReplica.Addr {
			t.Fatalf("sentinel %s reports %s, %v", ss.Addr, addr, err)
		}
	}
	role, _ := oldReplica.Do(t, "ROLE").([]any)
	if len(role) == 0 || role[0] != "master" {
		t.Fatalf("ROLE on the new master = %v", role)
	}
	if got := oldReplica.Do(t, "GET", "k"); got != "before" {
		t.Fatalf("GET k on the new master = %v", got)
	}

	// The sentinel-backed client follows the switch.
	waitFor(t, 10*time.Second, "the failover client to write to the new master", func() error {
		if err := fc.Set(ctx(t), "k2", "after", 0).Err(); err != nil {
			return err
		}
		if v, err := oldReplica.probeDo(probeTimeout, "GET", "k2"); v != "after" {
			return fmt.Errorf("GET k2 on the new master = %v, %v", v, err)
		}
		return nil
	}, sn.diag)
}

func TestSentinelTLS(t *testing.T) {
	t.Parallel()
	sn := StartSentinel(t, Options{TLS: true, Password: `p "w"`})
	if sn.Sentinels[0].TLSConfig() == nil {
		t.Fatal("sentinel has no TLS config")
	}
	if got := sn.MasterAddr(t); got != sn.Master.Addr {
		t.Fatalf("MasterAddr = %s, want %s", got, sn.Master.Addr)
	}
	fc := sn.FailoverClient(t)
	if err := fc.Set(ctx(t), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := sn.Master.Do(t, "GET", "k"); got != "v" {
		t.Fatalf("GET k = %v", got)
	}

	// A restarted sentinel reads back the config file it rewrote.
	ss := sn.Sentinels[1]
	ss.Stop()
	ss.Restart(t)
	waitFor(t, 10*time.Second, "the restarted sentinel to see the setup", func() error {
		return sn.checkSentinel(ss)
	}, sn.diag)
}

// TestNoLeakedProcesses checks that the cleanup kills and reaps every
// process, servers and sentinels alike.
func TestNoLeakedProcesses(t *testing.T) {
	t.Parallel()
	var pids []int
	t.Run("start", func(t *testing.T) {
		s := Start(t, Options{})
		r := Start(t, Options{ReplicaOf: s.Addr})
		pids = append(pids, s.Pid(), r.Pid())
		s.Kill()
		s.Restart(t)
		pids = append(pids, s.Pid())
	})
	if len(pids) != 3 {
		t.Fatalf("pids %v", pids)
	}
	for _, pid := range pids {
		if pid == 0 || !processGone(pid) {
			t.Errorf("process %d survived the test's cleanup", pid)
		}
	}
}

// fatalTB records the message of the first Fatal call and ends the calling
// goroutine, like testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestRedisServerNotFound(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f, Options{})
		f.msg = "Start returned"
	}()
	<-done
	if f.msg != notFoundHint {
		t.Fatalf("message %q, want %q", f.msg, notFoundHint)
	}
}

func TestStartFailureShowsLog(t *testing.T) {
	t.Parallel()
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f, Options{Args: []string{"--no-such-directive", "x"}})
		f.msg = "Start returned"
	}()
	<-done
	for _, want := range []string{"process exited during startup", "FATAL CONFIG FILE ERROR", "no-such-directive", "stdout.log"} {
		if !strings.Contains(f.msg, want) {
			t.Fatalf("failure message lacks %q:\n%s", want, f.msg)
		}
	}
}

// TestPortTaken simulates losing the race for the chosen port, at start and
// at restart.
func TestPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	taken := ln.Addr().(*net.TCPAddr).Port
	calls := 0
	pickPort = func() (int, error) {
		calls++
		if calls == 1 {
			return taken, nil
		}
		return proctest.FreePort()
	}
	t.Cleanup(func() { pickPort = proctest.FreePort })
	s := Start(t, Options{})
	ln.Close()
	if calls != 2 || s.Port == taken {
		t.Fatalf("%d port picks, port %d (taken %d)", calls, s.Port, taken)
	}
	if log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log")); !strings.Contains(string(log), "Address already in use") {
		t.Fatalf("redis.log does not show the failed first attempt:\n%s", log)
	}

	// Restart waits for its port to become free again.
	s.Stop()
	ln, err = net.Listen("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(500*time.Millisecond, func() { ln.Close() })
	s.Restart(t)
	if got := s.Do(t, "PING"); got != "PONG" {
		t.Fatalf("PING = %v", got)
	}
}

func TestCluster(t *testing.T) {
	c := StartCluster(t, Options{Password: "s3cret"})
	client := c.Client(t)
	ctx := ctx(t)
	// Keys in every slot range land on all three masters.
	for i := range 30 {
		if err := client.Set(ctx, fmt.Sprint("k", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range c.Nodes {
		if n := s.Do(t, "DBSIZE"); n == int64(0) {
			t.Fatalf("node %s holds no keys", s.Addr)
		}
	}
}
