package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluiceflow/sluice/internal/proctest"
)

const (
	sentinelReadyTimeout    = 20 * time.Second
	failoverAcceptTimeout   = 30 * time.Second
	failoverCompleteTimeout = 20 * time.Second
	replicaLinkTimeout      = 15 * time.Second
	replicaCatchUpTimeout   = 40 * time.Second
)

// Sentinel is a master, one replica and three sentinels (quorum 2) started
// by StartSentinel.
//
// Master and Replica name the current roles: Failover swaps them. They are
// not updated when the sentinels fail over on their own (e.g. after the test
// kills the master); MasterAddr always asks the sentinels.
type Sentinel struct {
	MasterName string
	Master     *Server
	Replica    *Server
	Sentinels  []*Server // three redis-server --sentinel processes, quorum 2

	opts Options
}

// StartSentinel starts a master, a replica of it and three sentinels
// monitoring the master as "mymaster" with quorum 2, down-after-milliseconds
// 1000 and failover-timeout 3000. o.Password, o.Users, o.TLS and o.Args apply
// to the master and the replica; the sentinels log in to them with the first
// of o.Users if any, else with o.Password (sentinel auth-user/auth-pass). The
// sentinels themselves need no password; with o.TLS they serve TLS only too.
//
// It returns once the replica's link to the master is up and every sentinel
// sees the master, the replica and the two other sentinels.
func StartSentinel(t testing.TB, o Options) *Sentinel {
	t.Helper()
	if o.ReplicaOf != "" {
		t.Fatal("redistest: StartSentinel: Options.ReplicaOf must be empty")
	}
	bin := redisServerPath(t)
	sn := &Sentinel{MasterName: "mymaster", opts: o}
	sn.Master = Start(t, o)
	ro := o
	ro.ReplicaOf = sn.Master.Addr
	sn.Replica = Start(t, ro)

	waitFor(t, replicaLinkTimeout, "the replica's link to the master", func() error {
		return replicaLinkUp(sn.Replica)
	}, sn.diag)

	masterPort := sn.Master.Port
	for range 3 {
		ss := newServer(t, Options{TLS: o.TLS}, true)
		ss.confFile = filepath.Join(ss.Dir, "sentinel.conf")
		ss.conf = func() string { return sn.sentinelConf(ss, masterPort) }
		ss.startFresh(t, bin)
		sn.Sentinels = append(sn.Sentinels, ss)
	}

	waitFor(t, sentinelReadyTimeout, "every sentinel to see the master, the replica and the other sentinels", func() error {
		for _, ss := range sn.Sentinels {
			if err := sn.checkSentinel(ss); err != nil {
				return fmt.Errorf("sentinel %s: %w", ss.Addr, err)
			}
		}
		return nil
	}, sn.diag)
	return sn
}

func (sn *Sentinel) sentinelConf(ss *Server, masterPort int) string {
	var b strings.Builder
	line := func(args ...string) {
		for i, a := range args {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(confQuote(a))
		}
		b.WriteByte('\n')
	}
	if ss.opts.TLS {
		for a := ss.tlsArgs(); len(a) >= 2; a = a[2:] {
			line(strings.TrimPrefix(a[0], "--"), a[1])
		}
	} else {
		line("port", strconv.Itoa(ss.Port))
	}
	line("bind", "127.0.0.1")
	line("protected-mode", "no")
	line("daemonize", "no")
	line("dir", ss.Dir)
	line("logfile", filepath.Join(ss.Dir, "redis.log"))
	line("sentinel", "resolve-hostnames", "no")
	line("sentinel", "announce-hostnames", "no")
	line("sentinel", "announce-ip", "127.0.0.1")
	n := sn.MasterName
	line("sentinel", "monitor", n, "127.0.0.1", strconv.Itoa(masterPort), "2")
	line("sentinel", "down-after-milliseconds", n, "1000")
	line("sentinel", "failover-timeout", n, "3000")
	line("sentinel", "parallel-syncs", n, "1")
	auth := sn.authConf()
	ss.authConf = auth
	for _, l := range auth {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// authConf returns the sentinel auth-user/auth-pass lines for the master.
func (sn *Sentinel) authConf() []string {
	user, pass := sn.opts.serverCredentials()
	if pass == "" {
		return nil
	}
	var out []string
	if user != "" {
		out = append(out, "sentinel auth-user "+confQuote(sn.MasterName)+" "+confQuote(user))
	}
	return append(out, "sentinel auth-pass "+confQuote(sn.MasterName)+" "+confQuote(pass))
}

// repairSentinelConf rewrites the "sentinel auth-user/auth-pass" lines of a
// sentinel's config file: redis 7.0's CONFIG REWRITE writes them unquoted, so
// a password containing spaces or quotes makes the file unreadable.
func (s *Server) repairSentinelConf() error {
	if len(s.authConf) == 0 {
		return nil
	}
	data, err := os.ReadFile(s.confFile)
	if err != nil {
		return err
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "sentinel auth-user ") || strings.HasPrefix(l, "sentinel auth-pass ") {
			continue
		}
		out = append(out, l)
	}
	out = append(out, s.authConf...)
	return os.WriteFile(s.confFile, []byte(strings.Join(out, "\n")+"\n"), 0o600)
}

// confQuote quotes a config file token the way redis' sdssplitargs reads it.
func confQuote(s string) string {
	plain := s != ""
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c > ' ' && c < 0x7f && c != '"' && c != '\'' && c != '\\'
	}
	if plain {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < ' ' || c >= 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func replicaLinkUp(r *Server) error {
	v, err := r.probeDo(probeTimeout, "INFO", "replication")
	if err != nil {
		return err
	}
	info, _ := v.(string)
	if st := infoField(info, "master_link_status"); st != "up" {
		return fmt.Errorf("%s: master_link_status=%q", r.Addr, st)
	}
	return nil
}

// replicatesFrom reports why r is not (yet) a connected replica of m.
func replicatesFrom(r, m *Server) error {
	v, err := r.probeDo(probeTimeout, "INFO", "replication")
	if err != nil {
		return err
	}
	info, _ := v.(string)
	role, port, link := infoField(info, "role"), infoField(info, "master_port"), infoField(info, "master_link_status")
	if role != "slave" || port != strconv.Itoa(m.Port) || link != "up" {
		return fmt.Errorf("%s: role %q, master_port %q, master_link_status %q", r.Addr, role, port, link)
	}
	return nil
}

// checkSentinel reports why ss is not yet fully aware of the setup.
func (sn *Sentinel) checkSentinel(ss *Server) error {
	c, err := ss.probe(context.Background(), probeTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.do(probeTimeout, "SENTINEL", "MASTER", sn.MasterName)
	if err != nil {
		return err
	}
	m := pairs(v)
	if addr := net.JoinHostPort(m["ip"], m["port"]); addr != sn.Master.Addr {
		return fmt.Errorf("master is %s, want %s", addr, sn.Master.Addr)
	}
	if m["flags"] != "master" {
		return fmt.Errorf("master flags %q", m["flags"])
	}
	if m["num-other-sentinels"] != strconv.Itoa(len(sn.Sentinels)-1) {
		return fmt.Errorf("knows %s other sentinels, want %d", m["num-other-sentinels"], len(sn.Sentinels)-1)
	}
	v, err = c.do(probeTimeout, "SENTINEL", "REPLICAS", sn.MasterName)
	if err != nil {
		return err
	}
	arr, _ := v.([]any)
	for _, e := range arr {
		r := pairs(e)
		if net.JoinHostPort(r["ip"], r["port"]) != sn.Replica.Addr {
			continue
		}
		if r["flags"] != "slave" || r["master-link-status"] != "ok" {
			return fmt.Errorf("replica %s: flags %q, master-link-status %q", sn.Replica.Addr, r["flags"], r["master-link-status"])
		}
		return nil
	}
	return fmt.Errorf("replica %s not known yet", sn.Replica.Addr)
}

// Endpoints returns the sentinels' host:port addresses.
func (sn *Sentinel) Endpoints() []string {
	out := make([]string, len(sn.Sentinels))
	for i, ss := range sn.Sentinels {
		out[i] = ss.Addr
	}
	return out
}

// masterAddr asks the running sentinels, in order, for the master address.
func (sn *Sentinel) masterAddr() (string, error) {
	var errs []error
	for _, ss := range sn.Sentinels {
		if !ss.Running() {
			continue
		}
		addr, err := sn.masterAddrFrom(ss)
		if err == nil {
			return addr, nil
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %w", ss.Addr, err))
	}
	if len(errs) == 0 {
		return "", errors.New("no sentinel is running")
	}
	return "", errors.Join(errs...)
}

func (sn *Sentinel) masterAddrFrom(ss *Server) (string, error) {
	v, err := ss.probeDo(probeTimeout, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", sn.MasterName)
	if err != nil {
		return "", err
	}
	arr, _ := v.([]any)
	if len(arr) != 2 {
		return "", fmt.Errorf("unexpected reply %v", v)
	}
	host, _ := arr[0].(string)
	port, _ := arr[1].(string)
	return net.JoinHostPort(host, port), nil
}

// MasterAddr returns the current master's host:port according to the
// sentinels (the first running sentinel that answers).
func (sn *Sentinel) MasterAddr(t testing.TB) string {
	t.Helper()
	addr, err := sn.masterAddr()
	if err != nil {
		t.Fatalf("redistest: ask sentinels for the master of %q: %v", sn.MasterName, err)
	}
	return addr
}

// Failover makes the sentinels promote the replica. If the current master is
// running, it first waits until the replica replicates it with its link up
// (bounded, 40 s) and then up to 2 s for the replica to acknowledge the
// master's writes (WAIT 1 2000). It sends SENTINEL FAILOVER (retried while
// the sentinel answers NOGOODSLAVE), then waits until every running sentinel
// reports the new master and the new master answers ROLE as master. Master
// and Replica are swapped.
//
// The sentinels turn the old master into a replica only about 10 s after the
// switch (redis 7.0); Failover does not wait for that, so a second Failover
// right after the first takes about 10 s longer.
func (sn *Sentinel) Failover(t testing.TB) {
	t.Helper()
	cur, err := sn.masterAddr()
	if err != nil {
		t.Fatalf("redistest: Failover: %v", err)
	}
	var oldMaster, promoted *Server
	switch cur {
	case sn.Master.Addr:
		oldMaster, promoted = sn.Master, sn.Replica
	case sn.Replica.Addr:
		oldMaster, promoted = sn.Replica, sn.Master
	default:
		t.Fatalf("redistest: Failover: sentinels report master %s, which is neither %s nor %s", cur, sn.Master.Addr, sn.Replica.Addr)
	}
	if !promoted.Running() {
		t.Fatalf("redistest: Failover: the replica %s (to be promoted) is not running", promoted.Addr)
	}
	if oldMaster.Running() {
		// Right after a failover the old master is still a master until
		// the sentinels convert it (about 10 s later); promoting it then
		// would drop the writes made since. Wait until it replicates.
		waitFor(t, replicaCatchUpTimeout, fmt.Sprintf("%s to replicate the master %s", promoted.Addr, oldMaster.Addr), func() error {
			return replicatesFrom(promoted, oldMaster)
		}, sn.diag)
		_, _ = oldMaster.probeDo(5*time.Second, "WAIT", "1", "2000")
	}

	waitFor(t, failoverAcceptTimeout, "a sentinel to accept SENTINEL FAILOVER", func() error {
		var errs []error
		for _, ss := range sn.Sentinels {
			if !ss.Running() {
				continue
			}
			_, err := ss.probeDo(probeTimeout, "SENTINEL", "FAILOVER", sn.MasterName)
			if err == nil || strings.HasPrefix(err.Error(), "INPROG") {
				return nil
			}
			errs = append(errs, fmt.Errorf("sentinel %s: %w", ss.Addr, err))
			var re respError
			if errors.As(err, &re) {
				break // the other sentinels would answer the same; retry later
			}
		}
		if len(errs) == 0 {
			return errors.New("no sentinel is running")
		}
		return errors.Join(errs...)
	}, sn.diag)

	waitFor(t, failoverCompleteTimeout, "the sentinels to switch to the new master "+promoted.Addr, func() error {
		for _, ss := range sn.Sentinels {
			if !ss.Running() {
				continue
			}
			addr, err := sn.masterAddrFrom(ss)
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", ss.Addr, err)
			}
			if addr != promoted.Addr {
				return fmt.Errorf("sentinel %s still reports master %s", ss.Addr, addr)
			}
			v, err := ss.probeDo(probeTimeout, "SENTINEL", "MASTER", sn.MasterName)
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", ss.Addr, err)
			}
			if f := pairs(v)["flags"]; strings.Contains(f, "failover") {
				return fmt.Errorf("sentinel %s: master flags %q", ss.Addr, f)
			}
		}
		v, err := promoted.probeDo(probeTimeout, "ROLE")
		if err != nil {
			return fmt.Errorf("ROLE on %s: %w", promoted.Addr, err)
		}
		if arr, _ := v.([]any); len(arr) == 0 || arr[0] != "master" {
			return fmt.Errorf("ROLE on %s: %v", promoted.Addr, v)
		}
		return nil
	}, sn.diag)
	sn.Master, sn.Replica = promoted, oldMaster
}

// FailoverOptions returns go-redis options for a sentinel-backed client of
// the master (password and TLS applied).
func (sn *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:    sn.MasterName,
		SentinelAddrs: sn.Endpoints(),
		Password:      sn.opts.Password,
		TLSConfig:     sn.Master.TLSConfig(),
	}
}

// FailoverClient returns a sentinel-backed client of the master; it is
// closed when the test finishes.
func (sn *Sentinel) FailoverClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(sn.FailoverOptions())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// diag returns the recent log lines of all processes, for failure messages.
func (sn *Sentinel) diag() string {
	var b strings.Builder
	for _, s := range append([]*Server{sn.Master, sn.Replica}, sn.Sentinels...) {
		if s != nil {
			b.WriteString(proctest.LogTail(filepath.Join(s.Dir, "redis.log"), 0))
		}
	}
	return b.String()
}

// waitFor polls cond every pollInterval until it returns nil, failing the
// test after timeout with the last error and diag().
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() error, diag func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: timed out after %v waiting for %s: %v\n%s", timeout, what, err, diag())
		}
		time.Sleep(4 * pollInterval)
	}
}
